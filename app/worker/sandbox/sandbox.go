// Package sandbox runs worker commands each in a room of its own (SPEC
// §8.2, docs/security.md): with bubblewrap, its own PID namespace (it sees
// only its own processes, and every process it started ends with it,
// setsid and double forks included) and mount view (the system read-only,
// a private empty HOME and /tmp, the server's files hidden); the network
// as the server has it. Mode none runs commands unsandboxed in a process
// group, with the same private HOME and TMPDIR directories. Each room is
// removed when its command ends. It owns nothing in the database.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Setting is the setting that chooses the mode.
const Setting = "GITLEASE_WORKER_SANDBOX"

// Mode says how commands are isolated.
type Mode string

// The modes.
const (
	// Auto sandboxes every command with bubblewrap, and refuses to run
	// commands where the machine allows no sandbox.
	Auto Mode = "auto"
	// None runs commands unsandboxed (a process group, a private HOME and
	// TMPDIR): they can see each other and the server's files.
	None Mode = "none"
)

// ParseMode reads GITLEASE_WORKER_SANDBOX; empty is Auto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return Auto, nil
	case Auto, None:
		return m, nil
	}
	return "", fmt.Errorf("%q is not auto or none", s)
}

// UnavailableError is New's answer in mode Auto on a machine that allows
// no sandbox: its message is the one line an operator needs.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string {
	return "worker commands cannot be sandboxed on this machine (" + e.Reason +
		"): install bubblewrap (apt-get install bubblewrap) and allow unprivileged user namespaces, or set " +
		Setting + "=none to run them unsandboxed"
}

// Config configures a Sandbox.
type Config struct {
	Mode Mode
	// Cred is the user commands run as; nil: this process's, except that
	// in mode Auto a root process runs them as nobody (SPEC §8.2: an
	// unprivileged user), since root in a sandbox keeps capabilities that
	// reach past it (raw devices, every file).
	Cred *syscall.Credential
	// Hide lists server paths no command may see (its working directory,
	// the …_FILE secrets, .gitlease/): a directory is covered by an empty
	// one, a file by an empty file. "/" is never hidden.
	Hide []string
	// Root is where rooms are made; when empty /var/tmp (outside /tmp,
	// so a sandbox's /tmp holds nothing, not even the way to its HOME), or
	// os.TempDir() where there is no /var/tmp.
	Root string
	// Bwrap is the bubblewrap binary; "bwrap" in PATH when empty.
	Bwrap string
}

// Sandbox starts commands in rooms of their own. It is safe for
// concurrent use.
type Sandbox struct {
	cfg   Config
	bwrap string // "" in mode None
	root  string // this sandbox's directory of rooms
}

// New prepares a sandbox: in mode Auto it finds bubblewrap and tries it
// once as the commands' user, and returns an *UnavailableError when that
// fails. Close removes its directory of rooms.
func New(cfg Config) (*Sandbox, error) {
	s := &Sandbox{cfg: cfg}
	if cfg.Mode == "" {
		s.cfg.Mode = Auto
	}
	if s.cfg.Mode == Auto && s.cfg.Cred == nil && os.Geteuid() == 0 {
		s.cfg.Cred = nobody()
	}
	if s.cfg.Mode == Auto {
		name := cfg.Bwrap
		if name == "" {
			name = "bwrap"
		}
		path, err := exec.LookPath(name)
		if err != nil {
			return nil, &UnavailableError{Reason: "bubblewrap (bwrap) is not installed"}
		}
		s.bwrap = path
		if err := s.probe(); err != nil {
			return nil, &UnavailableError{Reason: err.Error()}
		}
	}
	root := cfg.Root
	if root == "" {
		root = os.TempDir()
		if fi, err := os.Stat("/var/tmp"); err == nil && fi.IsDir() && os.Getenv("TMPDIR") == "" {
			root = "/var/tmp"
		}
	}
	dir, err := os.MkdirTemp(root, "gitlease-rooms-")
	if err != nil {
		return nil, fmt.Errorf("make the worker's directory of rooms: %w", err)
	}
	// Another user's command must reach its own room, and list none.
	if err := os.Chmod(dir, 0o711); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("make the worker's directory of rooms: %w", err)
	}
	s.root = dir
	return s, nil
}

// nobody is the credential of the user nobody (65534 where it has no
// entry).
func nobody() *syscall.Credential {
	c := &syscall.Credential{Uid: 65534, Gid: 65534}
	if u, err := user.Lookup("nobody"); err == nil {
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			c.Uid, c.Gid = uint32(uid), uint32(gid)
		}
	}
	return c
}

// Mode is the mode in force.
func (s *Sandbox) Mode() Mode { return s.cfg.Mode }

// Close removes the directory of rooms (what a crashed predecessor could
// not is left to the system's temporary-file cleaning).
func (s *Sandbox) Close() error { return removeAll(s.root) }

// probe runs a trivial command the way every command runs, so a machine
// that forbids user namespaces is found at start, not at the first item.
func (s *Sandbox) probe() error {
	cmd := exec.Command(s.bwrap, append(s.baseArgs(), "--", "/bin/sh", "-c", "exit 0")...)
	cmd.SysProcAttr = procAttr(s.cfg.Cred)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		defer close(done)
		out, err = cmd.CombinedOutput()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return errors.New("bwrap did not answer within 10s")
	}
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("bwrap fails: %s", msg)
	}
	return nil
}

// baseArgs are bubblewrap's options for every command: the system
// read-only, its own PID, IPC and UTS namespaces, a fresh /proc, /dev and
// /tmp, its own session, and death with the worker.
func (s *Sandbox) baseArgs() []string {
	args := []string{
		"--ro-bind", "/", "/", // first: what follows is mounted over it
		"--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
	}
	hide := slices.Clone(s.cfg.Hide)
	slices.Sort(hide) // a directory before what is in it
	var hidden []string
	for _, p := range hide {
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) || p == "/" || under(p, "/tmp") || slices.ContainsFunc(hidden, func(d string) bool { return under(p, d) }) {
			continue // /tmp is a fresh one already; so is what a hidden directory held
		}
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			args = append(args, "--tmpfs", p)
			hidden = append(hidden, p)
		default:
			args = append(args, "--ro-bind", "/dev/null", p)
		}
	}
	return args
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// Command is what to run in a room.
type Command struct {
	// Script runs as sh -c.
	Script string
	// Env is its environment; the sandbox sets HOME, TMPDIR and
	// GITLEASE_DISPATCH_FILE (Env's own are dropped).
	Env []string
	// Dispatch is written to the file GITLEASE_DISPATCH_FILE names,
	// readable only by the command.
	Dispatch []byte
	// Output receives stdout and stderr.
	Output io.Writer
	// WaitDelay bounds how long Wait waits for the output to close after
	// the command exited.
	WaitDelay time.Duration
}

// Process is a started command in its room.
type Process struct {
	cmd  *exec.Cmd
	room string
	sbx  bool
	done chan struct{}
	err  error
	// initPid and initFD (a pidfd; -1 when unknown) are the sandbox's
	// init: the PID namespace ends when it does.
	initPid int
	initFD  int

	closeOnce sync.Once
}

// Start makes a room and starts c in it. When ctx ends, every process of
// the room is killed (Kill). The caller must Close the process.
func (s *Sandbox) Start(ctx context.Context, c Command) (*Process, error) {
	room, err := s.makeRoom(c.Dispatch)
	if err != nil {
		return nil, err
	}
	home, dispatch := filepath.Join(room, "home"), filepath.Join(room, "dispatch.json")
	tmp := "/tmp"
	if s.bwrap == "" {
		tmp = filepath.Join(room, "tmp")
	}
	env := make([]string, 0, len(c.Env)+3)
	for _, kv := range c.Env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && k != "TMPDIR" && k != "GITLEASE_DISPATCH_FILE" {
			env = append(env, kv)
		}
	}
	env = append(env, "HOME="+home, "TMPDIR="+tmp, "GITLEASE_DISPATCH_FILE="+dispatch)

	var cmd *exec.Cmd
	var info *os.File // bubblewrap reports its init's pid there
	if s.bwrap != "" {
		r, w, err := os.Pipe()
		if err != nil {
			_ = removeAll(room)
			return nil, fmt.Errorf("start the command: %w", err)
		}
		info = r
		defer w.Close()
		args := append(s.baseArgs(),
			"--tmpfs", s.root, // no other room
			"--bind", home, home, "--ro-bind", dispatch, dispatch,
			"--chdir", home, "--info-fd", "3", "--", "/bin/sh", "-c", c.Script)
		cmd = exec.CommandContext(ctx, s.bwrap, args...)
		cmd.ExtraFiles = []*os.File{w}
	} else {
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", c.Script)
		cmd.Dir = home
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = c.Output, c.Output
	// Its own process group (the sandbox's monitor, or the command
	// unsandboxed), killed when the worker dies.
	cmd.SysProcAttr = procAttr(s.cfg.Cred)
	cmd.WaitDelay = c.WaitDelay
	p := &Process{cmd: cmd, room: room, sbx: s.bwrap != "", done: make(chan struct{}), initFD: -1}
	cmd.Cancel = func() error { p.Kill(); return nil }
	err = cmd.Start()
	if info != nil {
		cmd.ExtraFiles[0].Close()
		if err == nil {
			p.watchInit(info)
		}
		info.Close()
	}
	if err != nil {
		_ = removeAll(room)
		return nil, fmt.Errorf("start the command: %w", err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// makeRoom makes a room: a directory only the command's user can enter,
// with an empty home and tmp and the dispatch file.
func (s *Sandbox) makeRoom(dispatch []byte) (string, error) {
	room, err := os.MkdirTemp(s.root, "item-")
	if err != nil {
		return "", fmt.Errorf("make the command's room: %w", err)
	}
	err = s.own(room)
	for _, d := range []string{"home", "tmp"} {
		if err == nil {
			if err = os.Mkdir(filepath.Join(room, d), 0o700); err == nil {
				err = s.own(filepath.Join(room, d))
			}
		}
	}
	if err == nil {
		f := filepath.Join(room, "dispatch.json")
		if err = os.WriteFile(f, dispatch, 0o600); err == nil {
			err = s.own(f)
		}
	}
	if err != nil {
		_ = removeAll(room)
		return "", fmt.Errorf("make the command's room: %w", err)
	}
	return room, nil
}

func (s *Sandbox) own(path string) error {
	if c := s.cfg.Cred; c != nil {
		return os.Lchown(path, int(c.Uid), int(c.Gid))
	}
	return nil
}

// watchInit reads bubblewrap's report of its init's pid and holds a pidfd
// of it, so Kill reaches it and Close waits for it even after bubblewrap
// itself has exited (it exits when the command does, before the kernel
// has ended the rest of the namespace).
func (p *Process) watchInit(info *os.File) {
	var report struct {
		ChildPid int `json:"child-pid"`
	}
	if json.NewDecoder(info).Decode(&report) != nil || report.ChildPid <= 0 {
		return // bubblewrap failed to set up: nothing runs
	}
	p.initPid = report.ChildPid
	p.initFD = pidfdOpen(report.ChildPid)
}

// Pid is the started process's ID (bubblewrap's, when sandboxed).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the command has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the command exited, once Done is closed: nil, an
// *exec.ExitError, or exec.ErrWaitDelay.
func (p *Process) Err() error { return p.err }

// Signal sends sig to the command's processes: in a sandbox every process
// in it but its init (which would end them all at once), else the process
// group.
func (p *Process) Signal(sig syscall.Signal) {
	if !p.sbx {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		return
	}
	for _, pid := range descendants(p.initPid) {
		_ = syscall.Kill(pid, sig)
	}
}

// Kill ends every process of the command at once. In a sandbox that is
// its PID namespace's init, whose end the kernel makes the end of every
// process in it, however it detached.
func (p *Process) Kill() {
	if p.initFD >= 0 {
		pidfdKill(p.initFD)
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// Close kills whatever of the command is left, waits until every process
// of it has ended, and removes its room.
func (p *Process) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.Kill()
		<-p.done
		if p.initFD >= 0 {
			// The init exits only after every other process of its
			// namespace.
			pidfdWait(p.initFD, 30*time.Second)
			p.initFD = -1
		}
		err = removeAll(p.room)
	})
	return err
}

// children lists the child processes of pid (Linux's
// /proc/<pid>/task/<pid>/children).
func children(pid int) []int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// descendants lists every process below pid. In a PID namespace every
// process is below its init: an orphan is given to it.
func descendants(pid int) []int {
	var out []int
	queue := children(pid)
	for len(queue) > 0 && len(out) < 1<<16 {
		n := queue[0]
		queue = queue[1:]
		out = append(out, n)
		queue = append(queue, children(n)...)
	}
	return out
}

// removeAll removes a room, first making every directory in it
// writable: a command may leave one it made unreadable.
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("remove the command's room: %w", err)
	}
	return nil
}
