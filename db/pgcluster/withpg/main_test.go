package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/pgcluster"
)

// TestWithPG runs the built command the way scripts/with-postgres does,
// through each of its three ways to a database.
func TestWithPG(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "withpg")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Nothing of the test's own database settings leaks into the runs.
	var base []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "DATABASE_URL" && name != "GITLEASE_TEST_PG_HOSTPORT" {
			base = append(base, kv)
		}
	}
	// nothing answers on port 1: the throwaway cluster is forced.
	noServer := append(base[:len(base):len(base)], "GITLEASE_TEST_PG_HOSTPORT=127.0.0.1:1")

	t.Run("DATABASE_URL wins", func(t *testing.T) {
		const dsn = "postgres://u:hunter2@db.example:5433/x?sslmode=require"
		cmd := exec.Command(bin, "sh", "-c", `printf %s "$DATABASE_URL"`)
		cmd.Env = append(noServer, "DATABASE_URL="+dsn)
		stdout, stderr, status := runCmd(t, cmd)
		if status != 0 || stdout != dsn {
			t.Fatalf("status %d, DATABASE_URL %q; want 0, %q unchanged", status, stdout, dsn)
		}
		line := oneStderrLine(t, stderr)
		if !strings.Contains(line, "from the environment (db.example:5433/x)") || strings.Contains(line, "hunter2") {
			t.Errorf("stderr %q: want the host and database, and no password", line)
		}
	})

	t.Run("server at GITLEASE_TEST_PG_HOSTPORT", func(t *testing.T) {
		srv, err := pgcluster.StartTemp(context.Background(), nil, "", pgcluster.Config{BinDir: os.Getenv("GITLEASE_PG_BINDIR")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Remove(context.Background()) })
		hostport := "127.0.0.1:" + strconv.Itoa(srv.Port())
		cmd := exec.Command(bin, "--", "sh", "-c", `printf %s "$DATABASE_URL"`)
		cmd.Env = append(base[:len(base):len(base)], "GITLEASE_TEST_PG_HOSTPORT="+hostport)
		stdout, stderr, status := runCmd(t, cmd)
		if want := srv.URL("postgres"); status != 0 || stdout != want {
			t.Fatalf("status %d, DATABASE_URL %q; want 0, %q", status, stdout, want)
		}
		if line := oneStderrLine(t, stderr); !strings.Contains(line, "server at "+hostport) {
			t.Errorf("stderr %q: want it to name the server at %s", line, hostport)
		}
	})

	t.Run("throwaway cluster", func(t *testing.T) {
		// The command prints DATABASE_URL and waits for its stdin to close,
		// so the test can connect meanwhile; then it exits 7.
		cmd := exec.Command(bin, "sh", "-c", `echo "$DATABASE_URL"; read x; exit 7`)
		cmd.Env = noServer
		r := startCmd(t, cmd)
		dir, pid := r.waitCluster(t)
		// probe is the connect-and-ping check withpg makes of a server.
		u, err := url.Parse(r.dsn)
		if err != nil {
			t.Fatalf("DATABASE_URL %q: %v", r.dsn, err)
		}
		if dsn, ok := probe(u.Host); !ok || dsn != r.dsn {
			t.Fatalf("the throwaway cluster at DATABASE_URL %s does not answer as user postgres", r.dsn)
		}
		r.stdin.Close()
		if status := r.wait(t); status != 7 {
			t.Errorf("exit status %d, want the command's 7", status)
		}
		oneStderrLine(t, r.stderrText())
		assertRemoved(t, dir, pid)
	})

	t.Run("signal cleans up", func(t *testing.T) {
		cmd := exec.Command(bin, "sh", "-c", `echo "$DATABASE_URL"; exec sleep 60`)
		cmd.Env = noServer
		r := startCmd(t, cmd)
		dir, pid := r.waitCluster(t)
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if status := r.wait(t); status != 130 {
			t.Errorf("exit status %d after SIGINT, want 130 (the command killed by it)", status)
		}
		assertRemoved(t, dir, pid)
	})
}

// runCmd runs cmd and returns its stdout, stderr and exit status.
func runCmd(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// oneStderrLine checks that stderr is one line from with-postgres, and
// returns it.
func oneStderrLine(t *testing.T, stderr string) string {
	t.Helper()
	line := strings.TrimSuffix(stderr, "\n")
	if strings.Contains(line, "\n") || !strings.HasPrefix(line, "with-postgres: ") {
		t.Errorf("stderr = %q, want one line from with-postgres", stderr)
	}
	return line
}

// running is a started withpg whose command prints DATABASE_URL first.
type running struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *os.File // a file, which the child writes directly, so the test may read it any time
	dsn    string
	done   chan struct{}
}

// startCmd starts cmd and reads the DATABASE_URL its command prints.
func startCmd(t *testing.T, cmd *exec.Cmd) *running {
	t.Helper()
	r := &running{cmd: cmd, done: make(chan struct{})}
	var err error
	if r.stderr, err = os.Create(filepath.Join(t.TempDir(), "stderr")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.stderr.Close() })
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			cmd.Process.Kill()
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case r.dsn = <-lines:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no DATABASE_URL printed within 2 minutes; stderr: %s", r.stderrText())
	}
	return r
}

// stderrText is what withpg has written to stderr so far.
func (r *running) stderrText() string {
	b, _ := os.ReadFile(r.stderr.Name())
	return string(b)
}

// waitCluster returns the throwaway cluster's directory, from the stderr
// line, and its postmaster's pid.
func (r *running) waitCluster(t *testing.T) (string, int) {
	t.Helper()
	m := regexp.MustCompile(`throwaway cluster at 127\.0\.0\.1:\d+ \(data in (\S+), removed on exit\)`).FindStringSubmatch(r.stderrText())
	if m == nil {
		t.Fatalf("stderr %q does not name a throwaway cluster", r.stderrText())
	}
	pid := pgcluster.PostmasterPID(filepath.Join(m[1], "data"))
	if pid == 0 {
		t.Fatalf("no postmaster.pid in %s/data", m[1])
	}
	t.Logf("throwaway cluster in %s, postmaster %d", m[1], pid)
	return m[1], pid
}

// wait waits for withpg to exit and returns its exit status.
func (r *running) wait(t *testing.T) int {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- r.cmd.Wait() }()
	select {
	case <-errc:
		close(r.done)
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(2 * time.Minute):
		t.Fatal("withpg did not exit within 2 minutes")
		return 0
	}
}

// assertRemoved checks that the cluster's directory is gone and its
// postmaster has exited.
func assertRemoved(t *testing.T, dir string, pid int) {
	t.Helper()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("throwaway cluster directory %s still there: %v", dir, err)
	}
	if syscall.Kill(pid, 0) == nil {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if !strings.Contains(string(b), ") Z") {
			syscall.Kill(pid, syscall.SIGQUIT)
			t.Errorf("postmaster %d still running", pid)
		}
	}
}
