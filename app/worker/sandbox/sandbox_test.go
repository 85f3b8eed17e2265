package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a command's output, read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var nobodyCred = &syscall.Credential{Uid: 65534, Gid: 65534}

func newSandbox(t testing.TB, cfg Config) *Sandbox {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// run starts script and waits for it, returning its output.
func run(t *testing.T, s *Sandbox, script string, env ...string) (string, *Process) {
	t.Helper()
	out := &syncBuffer{}
	p, err := s.Start(context.Background(), Command{Script: script, Env: append([]string{"PATH=/usr/bin:/bin"}, env...),
		Dispatch: []byte(`{"d":1}`), Output: out, WaitDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not end within 30s")
	}
	return out.String(), p
}

// TestSandboxRoom: the command sees only its own processes, an empty
// private HOME and /tmp, its dispatch file readable, the hidden paths
// empty, the system read-only; its room is gone after Close. As root with
// a user (GITLEASE_WORKER_USER) and as a non-root worker alike.
func TestSandboxRoom(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs commands as nobody: run it as root (make test in the dev container does)")
	}
	secretDir := t.TempDir()
	secretFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(filepath.Join(secretDir, "state"), []byte("server-state"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte("private-key"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t, Config{Cred: nobodyCred, Hide: []string{secretDir, secretFile, "/"}})
	out, p := run(t, s, `
echo "procs $(ls /proc | grep -c '^[0-9]')"
echo "home $(ls -A "$HOME" | wc -l) tmp $(ls -A /tmp | wc -l) tmpdir $TMPDIR"
echo "dispatch $(cat "$GITLEASE_DISPATCH_FILE")"
echo "state [$(cat `+secretDir+`/state 2>/dev/null)] key [$(cat `+secretFile+` 2>/dev/null)]"
touch /etc/x 2>/dev/null && echo "wrote /etc" || echo "/etc read-only"
echo mine > "$HOME/f" && echo mine > /tmp/f && echo "writes own"
echo "uid $(id -u)"`)
	if err := p.Err(); err != nil {
		t.Fatalf("command failed: %v\n%s", err, out)
	}
	for _, want := range []string{"home 0 tmp 0 tmpdir /tmp", `dispatch {"d":1}`, "state [] key []", "/etc read-only", "writes own", "uid 65534"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var procs int
	if _, err := fmt.Sscanf(out[strings.Index(out, "procs "):], "procs %d", &procs); err != nil || procs > 6 {
		t.Errorf("the command saw %d processes, want only its own few:\n%s", procs, out)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.room); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the room %s is still there after Close: %v", p.room, err)
	}
}

// TestSandboxEndsEverything: processes that left the command's group
// (setsid, a double fork, nohup) are gone once the command has exited and
// Close returned (as its item ends), and a Kill ends a running command
// with all it started.
func TestSandboxEndsEverything(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, Config{})
	marker := "6" + strconv.Itoa(os.Getpid()%1000) + "1"
	out, p := run(t, s, `setsid sleep `+marker+` >/dev/null 2>&1 &
( sleep `+marker+`.5 >/dev/null 2>&1 & ) 
nohup sleep `+marker+`.7 >/dev/null 2>&1 &
echo started`)
	if !strings.Contains(out, "started") {
		t.Fatalf("output %q", out)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if left := sleepers(marker); len(left) != 0 {
		t.Errorf("processes left after the command exited: %v", left)
	}

	out2 := &syncBuffer{}
	q, err := s.Start(context.Background(), Command{Script: `setsid sleep ` + marker + ` & echo up; sleep ` + marker, Output: out2, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for !strings.Contains(out2.String(), "up") {
		time.Sleep(10 * time.Millisecond)
	}
	q.Kill()
	<-q.Done()
	_ = q.Close()
	if left := sleepers(marker); len(left) != 0 {
		t.Errorf("processes left after Kill: %v", left)
	}
}

// TestSandboxRootRunsCommandsAsNobody: a root worker without a user runs
// its commands as nobody, with no capabilities.
func TestSandboxRootRunsCommandsAsNobody(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: run it as root (make test in the dev container does)")
	}
	s := newSandbox(t, Config{})
	out, p := run(t, s, `echo "uid $(id -u) $(grep CapEff /proc/self/status)"`)
	defer p.Close()
	if !strings.Contains(out, "uid 65534 CapEff:\t0000000000000000") {
		t.Errorf("output %q, want uid 65534 without capabilities", out)
	}
}

// TestSandboxSignalReachesTheCommand: SIGTERM goes to the command (which
// may clean up), not to the sandbox around it.
func TestSandboxSignalReachesTheCommand(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, Config{})
	out := &syncBuffer{}
	p, err := s.Start(context.Background(), Command{Script: `trap 'echo cleaned up; exit 0' TERM; echo up; while :; do sleep 0.1; done`,
		Output: out, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for !strings.Contains(out.String(), "up") {
		time.Sleep(10 * time.Millisecond)
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not end on SIGTERM")
	}
	if !strings.Contains(out.String(), "cleaned up") || p.Err() != nil {
		t.Errorf("the command's trap did not run: %v %q", p.Err(), out.String())
	}
}

// TestSandboxContextEndsIt: the context given to Start ends the command
// and everything in its sandbox.
func TestSandboxContextEndsIt(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	p, err := s.Start(ctx, Command{Script: `echo up; sleep 600`, Output: out, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for !strings.Contains(out.String(), "up") {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the command outlived its context")
	}
}

// TestNoSandboxIsRefused: in mode auto, a machine without bubblewrap (or
// where it cannot make namespaces) is refused with one line naming
// GITLEASE_WORKER_SANDBOX=none; mode none starts without it.
func TestNoSandboxIsRefused(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Bwrap: "/nonexistent/bwrap"})
	var un *UnavailableError
	if !errors.As(err, &un) || !strings.Contains(err.Error(), Setting+"=none") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("New without bubblewrap: %v, want one line naming %s=none", err, Setting)
	}
	s := newSandbox(t, Config{Mode: None, Bwrap: "/nonexistent/bwrap"})
	out, p := run(t, s, `echo "tmpdir $TMPDIR home $HOME"`)
	defer p.Close()
	if !strings.Contains(out, "tmpdir "+p.room+"/tmp home "+p.room+"/home") {
		t.Errorf("unsandboxed output %q, want the room's tmp and home", out)
	}
	for _, s := range []string{"", "auto", "AUTO", "none"} {
		if _, err := ParseMode(s); err != nil {
			t.Errorf("ParseMode(%q): %v", s, err)
		}
	}
	if _, err := ParseMode("bwrap"); err == nil {
		t.Error("ParseMode accepted bwrap")
	}
}

// sleepers lists the processes whose command line names marker.
func sleepers(marker string) []string {
	out, _ := exec.Command("pgrep", "-af", "sleep "+marker).Output()
	var left []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "pgrep") {
			left = append(left, l)
		}
	}
	return left
}

// BenchmarkStartToFirstLine measures a command's start to its first line
// of output, in a sandbox and without one: what the sandbox adds between
// a lease and the command's first output (docs/BENCHMARKS.md).
func BenchmarkStartToFirstLine(b *testing.B) {
	for _, mode := range []Mode{Auto, None} {
		b.Run(string(mode), func(b *testing.B) {
			s := newSandbox(b, Config{Mode: mode})
			var toLine time.Duration
			for b.Loop() {
				start := time.Now()
				out := &syncBuffer{}
				p, err := s.Start(context.Background(), Command{Script: `echo ready`, Output: out, Env: []string{"PATH=/usr/bin:/bin"}})
				if err != nil {
					b.Fatal(err)
				}
				for !strings.Contains(out.String(), "ready\n") {
					select {
					case <-p.Done():
						if !strings.Contains(out.String(), "ready\n") {
							b.Fatalf("no output: %v", p.Err())
						}
					default:
						time.Sleep(20 * time.Microsecond)
					}
				}
				toLine += time.Since(start)
				_ = p.Close()
			}
			b.ReportMetric(float64(toLine.Microseconds())/float64(b.N)/1000, "ms-to-first-line")
		})
	}
}
