package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/webhook"
)

// The worker room, end to end against the built binary (docs/security.md):
// serve with its built-in worker and the fake GitHub, commands that try
// every way to reach each other and the server.

const (
	e2eRPCToken = "rpc-e2e-secret-4711"
	e2eWhsec    = "whsec-e2e-secret-4711"
	e2eAgentKey = "agent-key-0123456789"
	e2eRepo     = "octocat/Hello-World"
)

// sandboxProbe is every command's script. Issue #2 sleeps past the
// timeout; an item without a token (enqueued over /rpc) just ends; the
// others leave processes behind that try to outlive them, meet at the
// rendezvous (so both run at once), learn there the other's paths and
// host PID and serve's, and report every way in that worked as LEAK.
const sandboxProbe = `
case "$GITLEASE_QUALIFIED_ID" in *"#2") echo sleeping; exec sleep 6010;; esac
[ -n "$GITHUB_TOKEN" ] || { echo "no token"; exit 0; }
echo "mine" > "$HOME/mark"; echo "mine" > /tmp/mark
setsid sleep 6007 >/dev/null 2>&1 &
( sleep 6008 >/dev/null 2>&1 & )
nohup sleep 6009 >/dev/null 2>&1 &
eval "$(curl -sf "$RENDEZVOUS/arrive?entry=$GITLEASE_ENTRY_ID&home=$HOME&dispatch=$GITLEASE_DISPATCH_FILE")" || { echo "no rendezvous"; exit 3; }
n=0
for p in /proc/[0-9]*; do
	n=$((n+1))
	grep -qa "$OTHER_ENTRY" "$p/environ" 2>/dev/null && echo "LEAK the other's environ in $p"
	grep -qa "` + e2eRPCToken + `" "$p/environ" 2>/dev/null && echo "LEAK serve's environ in $p"
done
echo "procs $n"
[ -e "/proc/$OTHER_PID/environ" ] && grep -qa "$OTHER_ENTRY" "/proc/$OTHER_PID/environ" 2>/dev/null && echo "LEAK /proc/$OTHER_PID"
grep -qa "` + e2eRPCToken + `" "/proc/$SERVE_PID/environ" 2>/dev/null && echo "LEAK /proc/<serve>/environ"
[ -r "/proc/$SERVE_PID/mem" ] && echo "LEAK /proc/<serve>/mem"
cat "$OTHER_HOME/mark" 2>/dev/null && echo "LEAK the other's HOME"
[ -s "$OTHER_DISPATCH" ] && echo "LEAK the other's dispatch file"
ls -A "$SERVE_CWD" 2>/dev/null | grep -q . && echo "LEAK serve's working directory"
[ -s "$KEY_FILE" ] && echo "LEAK the private key file"
[ -s "$WHSEC_FILE" ] && echo "LEAK the webhook secret file"
python3 -c 'import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
for p in map(int, sys.argv[1:]):
    if libc.ptrace(16, p, 0, 0) == 0: print("LEAK ptrace attached to", p)
print("ptrace tried")' "$OTHER_PID" "$SERVE_PID"
echo "tmp $(ls -A /tmp | tr '\n' ' ')"
echo "write $(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: token $GITHUB_TOKEN" -d "{\"ref\":\"refs/heads/probe-$GITLEASE_ENTRY_ID\",\"sha\":\"$SHA\"}" "${API}repos/` + e2eRepo + `/git/refs")"
echo "token=$GITHUB_TOKEN key=$AGENT_KEY"
echo "probe done"
`

// rendezvous lets two commands meet: each arrives with its entry, HOME and
// dispatch file, waits for the other, and is told the other's, their host
// PIDs (found the way root finds anything) and serve's.
type rendezvous struct {
	t      *testing.T
	extra  map[string]string // told to every command
	mu     sync.Mutex
	byID   map[string]url2
	both   chan struct{}
	closed bool
}

type url2 struct{ home, dispatch string }

func (rv *rendezvous) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rv.mu.Lock()
	rv.byID[q.Get("entry")] = url2{q.Get("home"), q.Get("dispatch")}
	if len(rv.byID) == 2 && !rv.closed {
		rv.closed = true
		close(rv.both)
	}
	rv.mu.Unlock()
	select {
	case <-rv.both:
	case <-time.After(90 * time.Second):
		http.Error(w, "alone", http.StatusGatewayTimeout)
		return
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for id, o := range rv.byID {
		if id == q.Get("entry") {
			continue
		}
		fmt.Fprintf(w, "OTHER_ENTRY=%q\nOTHER_HOME=%q\nOTHER_DISPATCH=%q\nOTHER_PID=%d\n", id, o.home, o.dispatch, commandPid(id))
	}
	for k, v := range rv.extra {
		fmt.Fprintf(w, "%s=%q\n", k, v)
	}
}

// commandPid is the host PID of the shell running entry's command.
func commandPid(entry string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, _ := os.ReadFile(d + "/comm")
		env, _ := os.ReadFile(d + "/environ")
		if strings.TrimSpace(string(comm)) == "sh" && bytes.Contains(env, []byte("GITLEASE_ENTRY_ID="+entry)) {
			n, _ := strconv.Atoi(filepath.Base(d))
			return n
		}
	}
	return 0
}

// serveIn starts bin's serve in dir with env, as uid when not negative,
// and returns its URL and PID.
func serveIn(t *testing.T, bin, dir string, env []string, uid int) serveProcess {
	t.Helper()
	runnable := filepath.Join(dir, "gitlease")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(runnable, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(runnable, "serve")
	cmd.Env, cmd.Dir = env, dir
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("serve output:\n%s", out.String())
		}
	})
	return serveProcess{url: serveURL(t, out), pid: cmd.Process.Pid, out: out}
}

// deliverTo signs body and posts it as a GitHub delivery; it returns the
// answer.
func deliverTo(t *testing.T, base, event, id string, body []byte) webhook.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.EventHeader, event)
	req.Header.Set(webhook.DeliveryHeader, id)
	req.Header.Set(webhook.SignatureHeader, webhook.Sign([]byte(e2eWhsec), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans webhook.Response
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		t.Fatalf("delivery %s answered %d: %v", id, resp.StatusCode, err)
	}
	return ans
}

// fixture reads a payload and applies edit to it.
func fixture(t *testing.T, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../testdata/payloads/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	return b
}

// e2eGitHub is the fake GitHub with octocat/Hello-World in installation
// 2311213. Lenient: a refused write is what a test looks for.
func e2eGitHub(t *testing.T) *githubtest.Server {
	t.Helper()
	gh := githubtest.New(t, githubtest.Lenient())
	gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	gh.AddInstallation(2311213, e2eRepo)
	gh.ReserveNumbers(e2eRepo, 5000)
	return gh
}

// hostDir makes a directory outside /tmp (which every sandbox replaces
// with its own), so hiding it is the sandbox's doing.
func hostDir(t *testing.T, prefix string) string {
	t.Helper()
	return openDir(t, "/var/tmp", prefix)
}

// TestWorkerRoom: serve as root with GITLEASE_WORKER_USER, two items
// running at once (an issue, with a write token, and a pull request from
// a fork, with a read-only one). Neither command reaches the other's
// environment, token, HOME or dispatch file, nor serve's environment,
// memory, working directory or secret files, by /proc, by path or by
// ptrace; it sees a handful of processes and an empty /tmp of its own.
// Every process a command left (setsid, double fork, nohup) is gone once
// its item ends. The fork's write is refused by the fake GitHub. The
// token and the GITLEASE_WORKER_ENV secret show as *** in the check run,
// the stored note and serve's log. An item past GITLEASE_WORKER_TIMEOUT
// fails and its check run concludes timed_out. A stranger's issue is
// ignored, and a Re-run of an /rpc item is ignored with no GitHub write.
func TestWorkerRoom(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs commands as nobody: run it as root (make test in the dev container does)")
	}
	gh := e2eGitHub(t)
	forkHead := gh.Push(e2eRepo, "fork-head", "the fork's change")

	cwd := hostDir(t, "gitlease-serve-cwd-")
	if err := os.MkdirAll(filepath.Join(cwd, ".gitlease"), 0o755); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(cwd, "key.pem")
	whsecFile := filepath.Join(hostDir(t, "gitlease-secrets-"), "whsec")
	for f, v := range map[string]string{keyFile: string(gh.PrivateKeyPEM), whsecFile: e2eWhsec, filepath.Join(cwd, ".gitlease", "dev.json"): "{}"} {
		if err := os.WriteFile(f, []byte(v), 0o644); err != nil { // readable by all: only the sandbox hides them
			t.Fatal(err)
		}
	}
	rv := &rendezvous{t: t, byID: map[string]url2{}, both: make(chan struct{})}
	meet := httptest.NewServer(rv)
	t.Cleanup(meet.Close)

	dbURL := dbtest.URL(t)
	env := append(devTestEnv(), "DATABASE_URL="+dbURL, "PORT=0", "GITHUB_WEBHOOK_SECRET_FILE="+whsecFile,
		"GITHUB_APP_ID="+fmt.Sprint(gh.AppID), "GITHUB_PRIVATE_KEY_FILE="+keyFile, "GITHUB_API_URL="+gh.URL(),
		"GITLEASE_RPC_TOKEN="+e2eRPCToken, "GITLEASE_GITHUB_WRITES_PER_SEC=0",
		"GITLEASE_WORKER_SLOTS=4", "GITLEASE_WORKER_EXEC="+sandboxProbe, "GITLEASE_WORKER_USER=nobody",
		"GITLEASE_WORKER_TIMEOUT=5s", "GITLEASE_WORKER_ENV=AGENT_KEY,RENDEZVOUS",
		"AGENT_KEY="+e2eAgentKey, "RENDEZVOUS="+meet.URL)
	srv := serveIn(t, buildGitlease(t), cwd, env, -1)
	rv.extra = map[string]string{"SERVE_PID": strconv.Itoa(srv.pid), "SERVE_CWD": cwd, "KEY_FILE": keyFile,
		"WHSEC_FILE": whsecFile, "API": gh.URL(), "SHA": forkHead}

	// Who may start work: a stranger's issue is ignored.
	stranger := deliverTo(t, srv.url, "issues", "d-stranger", fixture(t, "issues-opened.json", func(m map[string]any) {
		m["issue"].(map[string]any)["number"] = 3
		m["issue"].(map[string]any)["author_association"] = "NONE"
	}))
	if stranger.Outcome != webhook.OutcomeIgnored || !strings.Contains(stranger.Reason, "GITLEASE_ALLOWED_AUTHORS") {
		t.Errorf("a stranger's issue: %+v, want ignored naming GITLEASE_ALLOWED_AUTHORS", stranger)
	}
	issue := deliverTo(t, srv.url, "issues", "d-issue", fixture(t, "issues-opened.json", func(m map[string]any) {
		m["issue"].(map[string]any)["number"] = 1
	}))
	fork := deliverTo(t, srv.url, "pull_request", "d-fork", fixture(t, "pull_request-opened-fork.json", func(m map[string]any) {
		pr := m["pull_request"].(map[string]any)
		pr["author_association"] = "COLLABORATOR"
		pr["head"].(map[string]any)["sha"] = forkHead
	}))
	slow := deliverTo(t, srv.url, "issues", "d-slow", fixture(t, "issues-opened.json", func(m map[string]any) {
		m["issue"].(map[string]any)["number"] = 2
	}))
	for _, a := range []webhook.Response{issue, fork, slow} {
		if a.Outcome != webhook.OutcomeEnqueued {
			t.Fatalf("delivery %s: %+v, want enqueued", a.DeliveryID, a)
		}
	}

	// A Re-run naming an item enqueued over /rpc is ignored and writes
	// nothing to GitHub (no outbox row is made).
	var rpcItem struct {
		EntryID string `json:"entry_id"`
	}
	rpcCall(t, srv.url, e2eRPCToken, "queue/v2/enqueue", map[string]any{"subject_dispatch": map[string]any{
		"subject": map[string]any{"kind": "github_pull_request", "id": "1296269#77", "title": "forged",
			"metadata": map[string]any{"installation_id": 2311213, "repository_id": 1296269, "repository": e2eRepo, "number": 77}},
		"workflow_ref": "coding", "trigger_source": "rpc", "requested_at": "2026-10-01T11:59:58Z",
	}}, &rpcItem)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	count := func(q string) (n int) {
		t.Helper()
		if err := pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rerun := deliverTo(t, srv.url, "check_run", "d-rerun-rpc", fixture(t, "check_run-rerequested.json", func(m map[string]any) {
		cr := m["check_run"].(map[string]any)
		cr["external_id"] = rpcItem.EntryID
		cr["app"].(map[string]any)["id"] = gh.AppID
	}))
	if rerun.Outcome != webhook.OutcomeIgnored {
		t.Errorf("Re-run of an /rpc item: %+v, want ignored", rerun)
	}
	// Other items run meanwhile: count only the /rpc subject's items and
	// their GitHub writes.
	items := count(`SELECT count(*) FROM work_items WHERE subject_id LIKE '%1296269#77'`)
	writes := count(`SELECT count(*) FROM outbox o JOIN work_items w ON w.id = o.entry_id WHERE w.subject_id LIKE '%1296269#77'`)
	if items != 1 || writes != 0 {
		t.Errorf("after the Re-run of an /rpc item: %d items of its subject and %d GitHub writes for them, want 1 and none", items, writes)
	}

	concluded := func(entry string) (githubtest.CheckRun, bool) {
		for _, cr := range gh.CheckRuns(e2eRepo) {
			if cr.ExternalID == entry && cr.Status == "completed" {
				return cr, true
			}
		}
		return githubtest.CheckRun{}, false
	}
	if !gh.Wait(3*time.Minute, func() bool {
		_, a := concluded(issue.EntryID)
		_, b := concluded(fork.EntryID)
		_, c := concluded(slow.EntryID)
		return a && b && c
	}) {
		t.Fatalf("the three check runs did not conclude within 3 minutes: %+v", gh.CheckRuns(e2eRepo))
	}

	var tokens []string
	for _, sc := range gh.TokenScopes() {
		if len(sc.RepositoryIDs) == 1 {
			tokens = append(tokens, sc.Token)
			if !sc.Revoked {
				t.Errorf("an item token was not revoked")
			}
		}
	}
	for _, it := range []struct {
		name, entry, write string
	}{{"issue", issue.EntryID, "write 201"}, {"fork pull request", fork.EntryID, "write 403"}} {
		cr, _ := concluded(it.entry)
		out := cr.Summary
		if !strings.Contains(out, "probe done") || cr.Conclusion != "success" {
			t.Errorf("%s: check run %s, summary:\n%s", it.name, cr.Conclusion, out)
			continue
		}
		if strings.Contains(out, "LEAK") {
			t.Errorf("%s: the command reached what is not its own:\n%s", it.name, out)
		}
		if !strings.Contains(out, "tmp mark \n") && !strings.Contains(out, "tmp mark\n") {
			t.Errorf("%s: its /tmp is not its own empty one:\n%s", it.name, out)
		}
		var procs int
		if i := strings.Index(out, "procs "); i < 0 {
			t.Errorf("%s: no process count:\n%s", it.name, out)
		} else if fmt.Sscanf(out[i:], "procs %d", &procs); procs > 8 {
			t.Errorf("%s: the command saw %d processes, want only its own few", it.name, procs)
		}
		if !strings.Contains(out, "ptrace tried") {
			t.Errorf("%s: the ptrace probe did not run (python3 missing?):\n%s", it.name, out)
		}
		if !strings.Contains(out, it.write) {
			t.Errorf("%s: want %q of its write:\n%s", it.name, it.write, out)
		}
		if !strings.Contains(out, "token=*** key=***") {
			t.Errorf("%s: token and key are not masked in the check run:\n%s", it.name, out)
		}
	}
	// The secrets appear nowhere gitlease shows output: check runs, the
	// stored notes (the dashboard's), serve's log.
	var notes string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(result_note, '\n'), '') FROM work_items`).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	shown := notes + srv.out.String()
	for _, cr := range gh.CheckRuns(e2eRepo) {
		shown += cr.Summary + cr.Text
	}
	for _, secret := range append(tokens, e2eAgentKey) {
		if strings.Contains(shown, secret) {
			t.Errorf("a secret (%.8s…) is shown verbatim", secret)
		}
	}
	// A fork's write was refused by the fake as GitHub refuses it.
	refused := false
	for _, v := range gh.Violations() {
		refused = refused || (v.Status == http.StatusForbidden && strings.Contains(v.Message, "contents:write"))
	}
	if !refused {
		t.Errorf("the fake refused no write of the fork's read-only token: %+v", gh.Violations())
	}
	if cr, _ := concluded(slow.EntryID); cr.Conclusion != "timed_out" {
		t.Errorf("the item past GITLEASE_WORKER_TIMEOUT concluded %q, want timed_out: %s", cr.Conclusion, cr.Summary)
	}
	if left := leftSleepers(); len(left) != 0 {
		t.Errorf("processes the commands started outlived their items: %v", left)
	}
}

// leftSleepers lists processes of the probe's detached sleeps, and of the
// slow item's: their durations are this test's own, so another test's
// sleeping command (TestCapHoldsOverThreeServeProcesses' sleep 600, say)
// is not counted.
func leftSleepers() []string {
	out, _ := exec.Command("pgrep", "-af", `^sleep (600[789]|6010)$`).Output()
	return strings.Fields(strings.TrimSpace(string(out)))
}

// TestWorkerRoomAsNonRootServe: serve running as a non-root user
// (nobody), no GITLEASE_WORKER_USER: its commands are sandboxed the same
// way, through an unprivileged user namespace.
func TestWorkerRoomAsNonRootServe(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs serve as nobody: run it as root (make test in the dev container does)")
	}
	gh := e2eGitHub(t)
	cwd := hostDir(t, "gitlease-serve-cwd-")
	keyFile := filepath.Join(cwd, "key.pem")
	if err := os.WriteFile(keyFile, gh.PrivateKeyPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	probe := `echo "procs $(ls /proc | grep -c '^[0-9]') uid $(id -u)"
ls -A ` + cwd + ` | grep -q . && echo "LEAK serve's working directory"
grep -qa ` + e2eRPCToken + ` /proc/*/environ 2>/dev/null && echo "LEAK an environ"
setsid sleep 6006 >/dev/null 2>&1 &
echo "probe done"`
	env := append(devTestEnv(), "DATABASE_URL="+dbtest.URL(t), "PORT=0", "GITHUB_WEBHOOK_SECRET="+e2eWhsec,
		"GITHUB_APP_ID="+fmt.Sprint(gh.AppID), "GITHUB_PRIVATE_KEY_FILE="+keyFile, "GITHUB_API_URL="+gh.URL(),
		"GITLEASE_RPC_TOKEN="+e2eRPCToken, "GITLEASE_GITHUB_WRITES_PER_SEC=0",
		"GITLEASE_WORKER_SLOTS=1", "GITLEASE_WORKER_EXEC="+probe)
	srv := serveIn(t, buildGitlease(t), cwd, env, 65534)
	a := deliverTo(t, srv.url, "issues", "d-1", fixture(t, "issues-opened.json", nil))
	if a.Outcome != webhook.OutcomeEnqueued {
		t.Fatalf("issue: %+v", a)
	}
	var cr githubtest.CheckRun
	if !gh.Wait(2*time.Minute, func() bool {
		for _, c := range gh.CheckRuns(e2eRepo) {
			if c.ExternalID == a.EntryID && c.Status == "completed" {
				cr = c
				return true
			}
		}
		return false
	}) {
		t.Fatal("the check run did not conclude within 2 minutes")
	}
	var procs, uid int
	i := strings.Index(cr.Summary, "procs ")
	if i >= 0 {
		_, _ = fmt.Sscanf(cr.Summary[i:], "procs %d uid %d", &procs, &uid)
	}
	if cr.Conclusion != "success" || !strings.Contains(cr.Summary, "probe done") || strings.Contains(cr.Summary, "LEAK") ||
		i < 0 || procs > 6 || uid != 65534 {
		t.Errorf("check run %s, summary:\n%s", cr.Conclusion, cr.Summary)
	}
	if out, _ := exec.Command("pgrep", "-af", "^sleep 6006$").Output(); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("the command's setsid child outlived its item: %s", out)
	}
}

// TestServeRefusesWithoutASandbox: with GITLEASE_WORKER_SANDBOX=auto (the
// default) on a machine where no sandbox can be made (here: no bubblewrap
// on PATH), serve with a worker command stops at start with one line
// naming GITLEASE_WORKER_SANDBOX=none; with none it serves, and warns.
func TestServeRefusesWithoutASandbox(t *testing.T) {
	t.Parallel()
	bin := buildGitlease(t)
	dbURL := dbtest.URL(t)
	var env []string
	for _, kv := range devTestEnv() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+t.TempDir(), "DATABASE_URL="+dbURL, "PORT=0", "GITHUB_WEBHOOK_SECRET="+e2eWhsec,
		"GITLEASE_WORKER_SLOTS=1", "GITLEASE_WORKER_EXEC=true")
	cmd := exec.Command(bin, "serve")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("serve without a sandbox: %v, want exit status 2\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.Contains(l, "GITLEASE_WORKER_SANDBOX") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "GITLEASE_WORKER_SANDBOX=none") {
		t.Errorf("want one line naming GITLEASE_WORKER_SANDBOX=none, got:\n%s", out)
	}
	stop, log := startBinary(t, bin, append(env, "GITLEASE_WORKER_SANDBOX=none"), "serve")
	serveURL(t, log)
	if !strings.Contains(log.String(), "GITLEASE_WORKER_SANDBOX=none: worker commands run unsandboxed") {
		t.Errorf("no warning at start with GITLEASE_WORKER_SANDBOX=none:\n%s", log.String())
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
