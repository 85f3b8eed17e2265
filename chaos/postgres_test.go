package chaos_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cluster is a throwaway PostgreSQL cluster the test owns, so it can stop
// and start it. Run as root, it runs as the postgres OS user (PostgreSQL
// refuses to run as root), like scripts/with-postgres.
type cluster struct {
	bindir, dir, data, log string
	port                   int
	asPostgres             bool
}

// pgBindir finds initdb and pg_ctl: GITLEASE_PG_BINDIR, pg_config
// --bindir, the newest /usr/lib/postgresql/*/bin, or PATH.
func pgBindir(t *testing.T) string {
	t.Helper()
	ok := func(d string) bool {
		_, err1 := os.Stat(filepath.Join(d, "initdb"))
		_, err2 := os.Stat(filepath.Join(d, "pg_ctl"))
		return err1 == nil && err2 == nil
	}
	if d := os.Getenv("GITLEASE_PG_BINDIR"); d != "" {
		return d
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil && ok(strings.TrimSpace(string(out))) {
		return strings.TrimSpace(string(out))
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if ok(dirs[i]) {
			return dirs[i]
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("no initdb and pg_ctl found (install PostgreSQL or set GITLEASE_PG_BINDIR): " +
		"TestPostgresRestartUnderLoad needs a cluster of its own to stop and start")
	return ""
}

// pgMajor is the major version in a /usr/lib/postgresql/<major>/bin path.
func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// startCluster creates a cluster in a new directory under /tmp (readable by
// the postgres user), starts it on a free port on 127.0.0.1 and registers
// its removal with t.Cleanup.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{bindir: pgBindir(t), asPostgres: os.Geteuid() == 0}
	base := os.TempDir()
	if c.asPostgres {
		base = "/tmp" // TMPDIR may be private to root
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Fatal("running as root, the test needs runuser to run PostgreSQL as the postgres user")
		}
	}
	dir, err := os.MkdirTemp(base, "gitlease-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir, c.data, c.log = dir, filepath.Join(dir, "data"), filepath.Join(dir, "postgres.log")
	t.Cleanup(func() {
		if out, err := c.command("pg_ctl", "stop", "-D", c.data, "-m", "immediate", "-w", "-t", "30").CombinedOutput(); err != nil &&
			!strings.Contains(string(out), "is the server running") {
			t.Logf("pg_ctl stop at cleanup: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if c.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the test needs a postgres OS user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.command("initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 5 {
		c.port = freePort(t)
		if lastErr = c.start(); lastErr == nil {
			return c
		}
	}
	t.Fatalf("could not start a PostgreSQL cluster: %v", lastErr)
	return nil
}

// command runs a PostgreSQL binary, as the postgres user when run as root,
// in the cluster's directory.
func (c *cluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bindir, name)
	var cmd *exec.Cmd
	if c.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.dir
	return cmd
}

// start starts the cluster on its port and waits until it accepts
// connections.
func (c *cluster) start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off "+
		"-c max_connections=100", c.port, c.dir)
	out, err := c.command("pg_ctl", "start", "-D", c.data, "-l", c.log, "-w", "-t", "60", "-o", opts).CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(c.log)
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// stop stops the cluster in mode (smart, fast, immediate) and waits until
// it is down.
func (c *cluster) stop(mode string) error {
	out, err := c.command("pg_ctl", "stop", "-D", c.data, "-m", mode, "-w", "-t", "60").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %v\n%s", mode, err, out)
	}
	return nil
}

// URL is a connection URL for the cluster's postgres database.
func (c *cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// freePort returns a TCP port on 127.0.0.1 that nothing listened on a
// moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestPostgresRestartUnderLoad runs `gitlease serve` on a PostgreSQL
// cluster the test owns and, under a light stream of issue deliveries
// (redelivered after a 5xx, as GitHub does), stops the cluster (pg_ctl stop
// -m fast) and starts it again, without touching serve. While it is down
// every webhook delivery must be answered 503 and /readyz 503, each within
// 5 s (an answer that does not come is a hang); once it is back, /readyz
// must return 200 and deliveries 2xx again, and in the end every delivery
// answered 2xx is recorded with its item, and every item is completed with
// its branch, pull request and check run on GitHub: nothing lost.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	sc := chaosScale()
	c := startCluster(t)
	dsn := c.URL()
	// Enough numbered issues for the whole run; only those sent count.
	total := int((time.Duration(sc.pgOutages)*(sc.pgDown+30*time.Second) + 30*time.Second) / sc.pgPace)
	gh := newGitHub(t, total)
	bin := buildGitlease(t)
	dir := logDir(t)
	env := serveEnv(dsn, gh, 5*time.Second)
	p := startServe(t, bin, env, dir, 0)
	t.Cleanup(func() { logProblems(t, []*serveProc{p}) })
	waitReady(t, p.base, 30*time.Second)

	ds := make([]delivery, total)
	for i := range ds {
		ds[i] = issueDelivery(t, i+1)
	}
	res := newLoadResult()
	snd := newSender(func() string { return p.base }, 5*time.Second, 3*time.Minute, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stopFeeding := make(chan struct{})
	loadDone := make(chan []delivery, 1)
	go func() { loadDone <- snd.run(ctx, ds, 4, sc.pgPace, stopFeeding) }()

	probe := &http.Client{Timeout: 5 * time.Second}
	for o := 1; o <= sc.pgOutages; o++ {
		time.Sleep(2 * time.Second) // the load flows
		if err := c.stop("fast"); err != nil {
			t.Fatal(err)
		}
		down := time.Now()
		readyz := map[string]int{}
		for time.Since(down) < sc.pgDown {
			status, err := getStatus(probe, p.base+"/readyz")
			switch {
			case err != nil:
				readyz["no answer"]++
				t.Errorf("outage %d: GET /readyz got no answer within 5 s while Postgres was down: %v", o, err)
			case status != http.StatusServiceUnavailable:
				readyz[strconv.Itoa(status)]++
				t.Errorf("outage %d: GET /readyz answered %d while Postgres was down, want 503", o, status)
			default:
				readyz["503"]++
			}
			time.Sleep(250 * time.Millisecond)
		}
		upFrom := time.Now()
		if err := c.start(); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		if !p.alive() {
			t.Fatalf("outage %d: serve exited while Postgres was down: %v\n%s", o, p.err, p.tail(40))
		}

		// While it was down: only 503s, each within the client's 5 s.
		during := map[string]int{}
		for _, a := range res.Attempts() {
			if a.Start.Before(down) || a.End.After(upFrom) {
				continue
			}
			switch {
			case a.Timeout:
				during["timeout"]++
			case a.Status == 0:
				during["transport error"]++
			default:
				during[strconv.Itoa(a.Status)]++
			}
		}
		if during["503"] == 0 || len(during) != 1 {
			t.Errorf("outage %d: webhook answers while Postgres was down: %v, want only 503s (and some)", o, during)
		}

		// Back: /readyz 200 and a delivery sent after the restart answered 2xx.
		readyAfter, deliveredAfter := time.Duration(-1), time.Duration(-1)
		for time.Since(up) < time.Minute && (readyAfter < 0 || deliveredAfter < 0) {
			if readyAfter < 0 {
				if status, _ := getStatus(probe, p.base+"/readyz"); status == http.StatusOK {
					readyAfter = time.Since(up)
				}
			}
			if deliveredAfter < 0 {
				for _, a := range res.Attempts() {
					if !a.Start.Before(up) && a.Status >= 200 && a.Status < 300 {
						deliveredAfter = a.End.Sub(up)
						break
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if readyAfter < 0 {
			t.Errorf("outage %d: /readyz not 200 within a minute of Postgres being back", o)
		}
		if deliveredAfter < 0 {
			t.Errorf("outage %d: no delivery answered 2xx within a minute of Postgres being back", o)
		}
		t.Logf("outage %d: down %s; /readyz while down %v; webhook answers while down %v; "+
			"after the restart /readyz 200 in %s, first 2xx delivery in %s",
			o, upFrom.Sub(down).Round(time.Millisecond), readyz, during,
			readyAfter.Round(time.Millisecond), deliveredAfter.Round(time.Millisecond))
	}
	time.Sleep(2 * time.Second)
	close(stopFeeding)
	sent := <-loadDone
	t.Logf("load: %d deliveries sent", len(sent))

	pool := openPool(t, dsn)
	checkIntake(t, pool, res, sent)
	waitSettled(t, pool, gh, len(sent), 4*time.Minute)
	checkCompleted(t, pool)
	checkGitHub(t, gh, mustItems(t, pool), replayNotices(t, pool))
	if err := p.terminate(time.Minute); err != nil {
		t.Errorf("serve on SIGTERM: %v, want exit 0", err)
	}
}
