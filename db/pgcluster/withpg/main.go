// Package main, the withpg command, runs a command with DATABASE_URL
// exported, pointing at a PostgreSQL server the tests may create and drop
// databases on.
// scripts/with-postgres builds and runs it; `make test` goes through that
// script. In order of preference:
//
//  1. DATABASE_URL, if it is already set (non-empty), is used unchanged.
//  2. A server answering at 127.0.0.1:5432 as user postgres (trust auth):
//     postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable.
//     GITLEASE_TEST_PG_HOSTPORT overrides the address probed.
//  3. Otherwise a throwaway cluster from db/pgcluster: initdb into a
//     temporary directory, started on a free port on 127.0.0.1 with fsync
//     off, as the postgres OS user when run as root, and stopped and
//     deleted when the command exits or withpg is interrupted.
//
// The exit status is the command's (128+n when signal n killed it). One
// line on stderr says which database is used. A signal withpg receives
// (SIGINT, SIGTERM, SIGHUP, SIGQUIT) is passed on to the command, and the
// throwaway cluster is removed once the command has exited. In cases 1 and
// 2 withpg replaces itself with the command.
//
// GITLEASE_PG_BINDIR names the directory of initdb and pg_ctl (default:
// pgcluster.FindBinDir's search).
//
// Usage:
//
//	withpg [-rm-build-dir DIR] [--] CMD [ARG...]
//
// -rm-build-dir removes DIR, the directory holding withpg's own executable,
// at start: scripts/with-postgres builds withpg into a temporary directory
// and leaves its removal to it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/pgcluster"
)

// prog prefixes every line withpg writes; it is the name users type.
const prog = "with-postgres"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is withpg with its arguments and standard streams; it returns the
// exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	say := func(format string, a ...any) { fmt.Fprintf(stderr, prog+": "+format+"\n", a...) }

	// From the start: a Ctrl-C while the throwaway cluster comes up must
	// still remove it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)

	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	rmBuildDir := fs.String("rm-build-dir", "", "remove `DIR`, the directory holding this executable, at start")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cmdArgs := fs.Args()
	if *rmBuildDir != "" {
		if err := removeBuildDir(*rmBuildDir); err != nil {
			say("%v", err)
		}
	}
	if len(cmdArgs) == 0 {
		say("usage: %s CMD [ARG...]", prog)
		return 2
	}

	// 1. An explicit DATABASE_URL.
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		say("using DATABASE_URL from the environment (%s)", describe(dsn))
		return execCommand(cmdArgs, os.Environ(), say)
	}

	// 2. A server at the usual place.
	hostport := os.Getenv("GITLEASE_TEST_PG_HOSTPORT")
	if hostport == "" {
		hostport = "127.0.0.1:5432"
	}
	if dsn, ok := probe(hostport); ok {
		say("using the PostgreSQL server at %s (user postgres)", hostport)
		return execCommand(cmdArgs, append(os.Environ(), "DATABASE_URL="+dsn), say)
	}

	// 3. A throwaway cluster.
	ctx := context.Background()
	c, err := pgcluster.StartTemp(ctx, nil, "", pgcluster.Config{
		BinDir:         os.Getenv("GITLEASE_PG_BINDIR"),
		MaxConnections: 200,
	})
	if err != nil {
		if errors.Is(err, pgcluster.ErrNoBinaries) {
			say("no PostgreSQL reachable at %s and %v (install PostgreSQL, set GITLEASE_PG_BINDIR, or set DATABASE_URL)", hostport, err)
		} else {
			say("no PostgreSQL reachable at %s, and could not start a throwaway cluster: %v", hostport, err)
		}
		return 1
	}
	remove := func() {
		stopCtx, cancel := context.WithTimeout(ctx, pgcluster.DefaultCommandTimeout)
		defer cancel()
		if err := c.Remove(stopCtx); err != nil {
			say("remove the throwaway cluster in %s: %v", c.Dir(), err)
		}
	}
	defer remove()
	select {
	case sig := <-sigs:
		// Interrupted while the cluster came up: nothing to run.
		return 128 + int(sig.(syscall.Signal))
	default:
	}
	say("no PostgreSQL at %s; using a throwaway cluster at 127.0.0.1:%d (data in %s, removed on exit)", hostport, c.Port(), c.Dir())

	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+c.URL("postgres"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		say("%v", err)
		return notRunStatus(err)
	}
	exited := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-exited:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(exited)
	return exitStatus(cmd.ProcessState, err)
}

// removeBuildDir removes dir if it holds this executable, as the wrapper
// script asks; it refuses any other directory.
func removeBuildDir(dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("remove build directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil || filepath.Dir(exe) != abs {
		return fmt.Errorf("remove build directory: %s does not hold this executable (%s); left alone", dir, exe)
	}
	return os.RemoveAll(abs)
}

// probe reports whether a PostgreSQL server at hostport accepts a
// connection as user postgres without a password within 3 seconds, and
// the URL of its postgres database.
func probe(hostport string) (string, bool) {
	if _, _, err := net.SplitHostPort(hostport); err != nil {
		return "", false
	}
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: hostport, Path: "/postgres", RawQuery: "sslmode=disable"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return "", false
	}
	defer conn.Close(ctx)
	if err := conn.Ping(ctx); err != nil {
		return "", false
	}
	return u.String(), true
}

// execCommand replaces withpg with the command, with env; it returns only
// when that fails, with the shell's status for it.
func execCommand(args, env []string, say func(string, ...any)) int {
	path, err := exec.LookPath(args[0])
	if err == nil {
		err = syscall.Exec(path, args, env)
	}
	say("%s: %v", args[0], err)
	return notRunStatus(err)
}

// notRunStatus is the shell's exit status for a command that could not be
// run: 127 when it was not found, 126 otherwise.
func notRunStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return 127
	}
	return 126
}

// exitStatus is the command's exit status, 128+n when signal n killed it,
// as a shell reports it.
func exitStatus(ps *os.ProcessState, err error) int {
	if ps == nil {
		return 1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if err != nil && ps.ExitCode() == 0 {
		return 1
	}
	return ps.ExitCode()
}

// describe is host[:port]/db of a connection string, without user,
// password or parameters, for the line saying which database is used.
func describe(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Host + u.Path
	}
	// keyword=value form: show only host, port and dbname.
	var out []string
	for _, kv := range strings.Fields(dsn) {
		for _, key := range []string{"host=", "hostaddr=", "port=", "dbname="} {
			if strings.HasPrefix(kv, key) {
				out = append(out, kv)
			}
		}
	}
	if len(out) == 0 {
		return "(keyword/value DSN)"
	}
	return strings.Join(out, " ")
}
