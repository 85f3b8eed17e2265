package pgcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pgCommand builds the command for the PostgreSQL program name in the
// cluster's BinDir; see command.
func (c *Cluster) pgCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	return c.command(ctx, filepath.Join(c.cfg.BinDir, name), args...)
}

// command builds the command for prog, as the postgres user when we are
// root. It runs in its own process group so that a Ctrl-C at the terminal
// does not reach it: the server is stopped deliberately, by Stop, after the
// caller has drained.
func (c *Cluster) command(ctx context.Context, prog string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	switch {
	case !c.asPostgres:
		cmd = exec.CommandContext(ctx, prog, args...)
	case c.runuser != "":
		cmd = exec.CommandContext(ctx, c.runuser, append([]string{"-u", "postgres", "--", prog}, args...)...)
	default:
		quoted := []string{shellQuote(prog)}
		for _, a := range args {
			quoted = append(quoted, shellQuote(a))
		}
		cmd = exec.CommandContext(ctx, "su", "-s", "/bin/sh", "postgres", "-c", strings.Join(quoted, " "))
	}
	// "/" is readable by everyone; our working directory may not be
	// readable by the postgres user.
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs the PostgreSQL program name with the cluster's CommandTimeout,
// returning its output in the error, prefixed with what, when it fails.
func (c *Cluster) run(ctx context.Context, what, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommandTimeout)
	defer cancel()
	out, err := c.pgCommand(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", what, err, oneLine(string(out)))
	}
	return nil
}

// chownTree gives root and everything under it to uid:gid, unless root is
// already theirs (the usual case after the first run).
func chownTree(root string, uid, gid int) error {
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
		return nil
	}
	return filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// PostmasterPID is the process ID recorded in the first line of dataDir's
// postmaster.pid, or 0 when there is none (no server running, or it has
// just removed the file on its way out).
func PostmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0
	}
	return pid
}

// waitGone waits up to limit for process pid to exit and reports whether
// it did. A zombie counts as gone: it runs nothing, and its parent (init,
// since pg_ctl detaches the postmaster) is the one to reap it.
func waitGone(pid int, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// isZombie reports whether /proc says pid has exited but is not reaped
// yet; false where there is no /proc.
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// shellQuote quotes s for sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// oneLine squeezes a command's output into one line for an error message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// logTail returns the last n non-empty lines of a file after byte offset,
// joined with " | ", or "" if it cannot be read.
func logTail(path string, offset int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
			if len(lines) > n {
				lines = lines[1:]
			}
		}
	}
	return strings.Join(lines, " | ")
}
