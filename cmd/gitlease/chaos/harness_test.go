package chaos_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/githubtest"
)

// The repository, installation and webhook secret every test uses: the
// testdata fixtures' octocat/Hello-World.
const (
	repoOwner      = "octocat"
	repoName       = "Hello-World"
	repoFull       = repoOwner + "/" + repoName
	repoID         = 1296269
	installationID = 2311213
	webhookSecret  = "chaos-webhook-secret"
	rpcToken       = "chaos-rpc-token-0123"
	// workerExec is the built-in worker's command: quick, so items finish
	// within the test, but long enough that kills land while some run.
	workerExec = "sleep 0.2"
)

// scale is how much each test does: the short version for `make test`, the
// long one for `make chaos` (GITLEASE_CHAOS_LONG=1).
type scale struct {
	long bool

	// TestKillServeUnderLoad.
	killDeliveries int           // unique issue deliveries
	kills          int           // SIGKILLs, each followed by a restart
	killPace       time.Duration // between two deliveries
	killGapMin     time.Duration // least time a serve lives before it is killed
	killGapMax     time.Duration // most time a serve lives before it is killed

	// TestPostgresRestartUnderLoad.
	pgOutages int           // stop/start cycles
	pgDown    time.Duration // how long each outage lasts
	pgPace    time.Duration // between two deliveries

	// TestFailover, TestFailoverAsynchronous.
	foPace   time.Duration // between two deliveries
	foBefore time.Duration // load before the primary is killed (or replication stalled)
	foOutage time.Duration // from the kill to the promotion
	foAfter  time.Duration // load once the old primary is back as a standby
	foStall  time.Duration // how long replication stalls before the kill (asynchronous)

	// TestGitHubFaults.
	faultIssues, faultPulls int
	faultSettle             time.Duration // how long the runs may take to settle after the load
}

// chaosScale returns the scale GITLEASE_CHAOS_LONG selects.
func chaosScale() scale {
	if os.Getenv("GITLEASE_CHAOS_LONG") == "1" {
		return scale{
			long:           true,
			killDeliveries: 300, kills: 20, killPace: 150 * time.Millisecond,
			killGapMin: 500 * time.Millisecond, killGapMax: 3 * time.Second,
			pgOutages: 5, pgDown: 12 * time.Second, pgPace: 100 * time.Millisecond,
			// About 500 issues: each costs the fake GitHub's installation
			// about 7 calls of its 5000 an hour.
			foPace: 40 * time.Millisecond, foBefore: 8 * time.Second, foOutage: 5 * time.Second,
			foAfter: 8 * time.Second, foStall: 3 * time.Second,
			faultIssues: 60, faultPulls: 15, faultSettle: 10 * time.Minute,
		}
	}
	return scale{
		killDeliveries: 60, kills: 3, killPace: 120 * time.Millisecond,
		killGapMin: 700 * time.Millisecond, killGapMax: 2500 * time.Millisecond,
		pgOutages: 1, pgDown: 4 * time.Second, pgPace: 150 * time.Millisecond,
		foPace: 60 * time.Millisecond, foBefore: 3 * time.Second, foOutage: 2 * time.Second,
		foAfter: 3 * time.Second, foStall: 1500 * time.Millisecond,
		faultIssues: 10, faultPulls: 3, faultSettle: time.Minute,
	}
}

// chaosRand returns the test's random source, seeded from
// GITLEASE_CHAOS_SEED or the clock, and logs the seed so a run's choices
// can be repeated.
func chaosRand(t *testing.T) (*rand.Rand, uint64) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("GITLEASE_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("GITLEASE_CHAOS_SEED=%q is not an unsigned integer", v)
		}
		seed = n
	}
	t.Logf("seed %d (GITLEASE_CHAOS_SEED=%d repeats this run's random choices)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed)), seed
}

// buildGitlease builds cmd/gitlease into a temporary directory and returns
// the binary's path.
func buildGitlease(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gitlease")
	start := time.Now()
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gitlease/gitlease/cmd/gitlease").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/gitlease: %v\n%s", err, out)
	}
	t.Logf("built gitlease in %s", time.Since(start).Round(time.Millisecond))
	return bin
}

// newGitHub starts a strict fake GitHub with the fixtures' repository and
// installation. Issue numbers 1..reserve are kept free of pull request
// numbers. It fails the test on any request GitHub would reject and on any
// ref update: gitlease never moves a ref.
func newGitHub(t *testing.T, reserve int, opts ...githubtest.Option) *githubtest.Server {
	t.Helper()
	gh := githubtest.New(t, append([]githubtest.Option{githubtest.ForbidRefUpdates()}, opts...)...)
	gh.AddRepo(repoOwner, repoName, repoID, "main", true)
	gh.AddInstallation(installationID, repoFull)
	gh.ReserveNumbers(repoFull, reserve)
	return gh
}

// serveEnv is the environment of a `gitlease serve` on dsn that talks to gh
// with lease TTL ttl and the built-in worker running workerExec in 5 slots.
// Nothing of the test's own environment that gitlease reads is passed on.
func serveEnv(dsn string, gh *githubtest.Server, ttl time.Duration) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || name == "PORT" || strings.HasPrefix(name, "GITHUB_") ||
			strings.HasPrefix(name, "GITLEASE_") || strings.HasPrefix(name, "PG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"DATABASE_URL="+dsn,
		"PORT=0",
		"GITHUB_WEBHOOK_SECRET="+webhookSecret,
		"GITHUB_APP_ID="+strconv.FormatInt(gh.AppID, 10),
		"GITHUB_PRIVATE_KEY="+string(gh.PrivateKeyPEM),
		"GITHUB_API_URL="+gh.URL(),
		"GITLEASE_RPC_TOKEN="+rpcToken,
		"GITLEASE_LEASE_TTL="+ttl.String(),
		"GITLEASE_WORKER_SLOTS=5",
		"GITLEASE_WORKER_EXEC="+workerExec,
		// Unpaced writes and content, so hundreds of items settle within
		// the bounds; the fake's rate limits are still honoured.
		"GITLEASE_GITHUB_WRITES_PER_SEC=0",
		"GITLEASE_GITHUB_CONTENT_PER_HOUR=0",
	)
}

// logDir is where serve logs go: GITLEASE_CHAOS_LOGS/<test> when set (kept
// after the test), a temporary directory otherwise.
func logDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("GITLEASE_CHAOS_LOGS")
	if base == "" {
		return t.TempDir()
	}
	dir := filepath.Join(base, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("serve logs in %s", dir)
	return dir
}

// serveProc is one running `gitlease serve` process.
type serveProc struct {
	n       int    // incarnation, from 0
	pid     int    // process ID
	base    string // http://127.0.0.1:<port>
	logPath string

	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped
	err    error         // the exit error, set before exited closes
}

// startServe starts `bin serve` with env, writing its log to dir, and
// returns once it listens. It fails the test if serve exits first or does
// not listen within a minute. The process is killed at the end of the test
// if it is still running.
func startServe(t *testing.T, bin string, env []string, dir string, n int) *serveProc {
	t.Helper()
	p := &serveProc{n: n, logPath: filepath.Join(dir, fmt.Sprintf("serve-%02d.log", n)), exited: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = env
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	p.pid = p.cmd.Process.Pid
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logFile.Write(append(line, '\n'))
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "serving" {
				select {
				case addrs <- rec.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(logFile, stderr)
		p.err = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	select {
	case addr := <-addrs:
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("serve listens on %q: %v", addr, err)
		}
		p.base = "http://127.0.0.1:" + port
		return p
	case <-p.exited:
		t.Fatalf("serve %d exited at start: %v\n%s", n, p.err, p.tail(40))
	case <-time.After(time.Minute):
		t.Fatalf("serve %d did not listen within a minute\n%s", n, p.tail(40))
	}
	return nil
}

// kill sends SIGKILL and waits until the process is gone.
func (p *serveProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// alive reports whether the process is still running.
func (p *serveProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// terminate sends SIGTERM and returns the exit error (nil for status 0), or
// an error if the process is still there after within.
func (p *serveProc) terminate(within time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(within):
		return fmt.Errorf("serve %d (pid %d) still running %s after SIGTERM", p.n, p.pid, within)
	}
}

// tail returns the last n lines of the log.
func (p *serveProc) tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logRecord is the part of a serve log line the summary reads.
type logRecord struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Err   string `json:"err"`
}

// problems counts the log's WARN and ERROR lines by level and message, with
// one example error each, for reports.
func (p *serveProc) problems() map[string]string {
	out := map[string]string{}
	counts := map[string]int{}
	f, err := os.Open(p.logPath)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec logRecord
		if json.Unmarshal(sc.Bytes(), &rec) != nil || (rec.Level != "WARN" && rec.Level != "ERROR") {
			continue
		}
		key := rec.Level + " " + rec.Msg
		counts[key]++
		if _, ok := out[key]; !ok {
			out[key] = rec.Err
		}
	}
	for k, ex := range out {
		out[k] = fmt.Sprintf("%d× (e.g. %s)", counts[k], truncate(ex, 200))
	}
	return out
}

// logProblems logs every incarnation's WARN and ERROR lines, summarised.
func logProblems(t *testing.T, procs []*serveProc) {
	t.Helper()
	for _, p := range procs {
		probs := p.problems()
		if len(probs) == 0 {
			continue
		}
		keys := make([]string, 0, len(probs))
		for k := range probs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "\n  %s: %s", k, probs[k])
		}
		t.Logf("serve %d (pid %d) warnings and errors:%s", p.n, p.pid, b.String())
	}
}

// truncate shortens s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// getStatus GETs url with a client timeout and returns the status (0 and
// the error when there was no answer).
func getStatus(client *http.Client, url string) (int, error) {
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// waitReady polls base/readyz until it answers 200, for at most within.
func waitReady(t *testing.T, base string, within time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(within)
	for {
		status, err := getStatus(client, base+"/readyz")
		if status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz not 200 within %s: status %d, %v", base, within, status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readyzAnswer is what GET /readyz says.
type readyzAnswer struct {
	Status     int    `json:"-"`
	Reason     string `json:"reason"`
	Durability string `json:"durability"`
}

// getReadyz asks base/readyz (Status 0 when no answer came).
func getReadyz(client *http.Client, base string) readyzAnswer {
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return readyzAnswer{Reason: err.Error()}
	}
	defer resp.Body.Close()
	var a readyzAnswer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	a.Status = resp.StatusCode
	return a
}

// answersBetween counts the attempts to base ("" any) that started at or
// after from and ended before to, by answer.
func answersBetween(res *loadResult, base string, from, to time.Time) map[string]int {
	out := map[string]int{}
	for _, a := range res.Attempts() {
		if !a.Start.Before(from) && a.End.Before(to) && (base == "" || a.Base == base) {
			out[a.answer()]++
		}
	}
	return out
}

// untilBack measures, after t0, how long until base/readyz answers 200 and
// until an attempt to base started after t0 is answered 2xx; -1 for what
// does not happen within a minute.
func untilBack(res *loadResult, base string, t0 time.Time) (readyAfter, deliveredAfter time.Duration) {
	probe := &http.Client{Timeout: 5 * time.Second}
	readyAfter, deliveredAfter = -1, -1
	for time.Since(t0) < time.Minute && (readyAfter < 0 || deliveredAfter < 0) {
		if readyAfter < 0 {
			if getReadyz(probe, base).Status == http.StatusOK {
				readyAfter = time.Since(t0)
			}
		}
		if deliveredAfter < 0 {
			for _, a := range res.Attempts() {
				if a.Base == base && !a.Start.Before(t0) && a.Status >= 200 && a.Status < 300 {
					if d := a.End.Sub(t0); deliveredAfter < 0 || d < deliveredAfter {
						deliveredAfter = d
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return readyAfter, deliveredAfter
}
