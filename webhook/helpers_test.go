package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// Secrets the test handlers verify with, in order.
var testSecrets = []string{"It's a Secret to Everybody", "the previous secret"}

const (
	repoID    = 1296269
	repoName  = "octocat/Hello-World"
	installID = 2311213
	botLogin  = "gitlease[bot]"
)

// payloadDir is where the fixtures live, shaped like GitHub's deliveries.
const payloadDir = "../testdata/payloads"

// payload reads a fixture by name, without .json.
func payload(tb testing.TB, name string) []byte {
	tb.Helper()
	return fixture(tb, payloadDir, name)
}

// fixture reads the fixture name (without .json) from dir.
func fixture(tb testing.TB, dir, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		tb.Fatalf("read fixture: %v", err)
	}
	return b
}

// allPayloads returns every fixture with the event it is a delivery of.
func allPayloads(tb testing.TB) map[string][]byte {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(payloadDir, "*.json"))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("list fixtures: %v (%d found)", err, len(paths))
	}
	out := map[string][]byte{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		out[name] = payload(tb, name)
	}
	return out
}

// eventOf is the X-GitHub-Event of a fixture: its name up to the first "-".
func eventOf(name string) string {
	event, _, _ := strings.Cut(name, "-")
	return event
}

// edit decodes a fixture, lets fn change it and encodes it again.
func edit(tb testing.TB, name string, fn func(m map[string]any)) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload(tb, name), &m); err != nil {
		tb.Fatalf("decode fixture %s: %v", name, err)
	}
	fn(m)
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// obj returns m[key] as an object, for edits.
func obj(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

// fakePRs answers pull request lookups from the pull_request-opened fixture.
type fakePRs struct {
	pr    *github.PullRequest
	err   error
	calls atomic.Int32
}

func newFakePRs(tb testing.TB) *fakePRs {
	var ev github.PullRequestEvent
	if err := json.Unmarshal(payload(tb, "pull_request-opened"), &ev); err != nil {
		tb.Fatal(err)
	}
	return &fakePRs{pr: ev.PullRequest}
}

func (f *fakePRs) PullRequest(_ context.Context, installationID int64, owner, repo string, number int) (*github.PullRequest, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	if installationID != installID || owner+"/"+repo != repoName || number != f.pr.GetNumber() {
		return nil, fmt.Errorf("fake: no pull request %s/%s#%d for installation %d", owner, repo, number, installationID)
	}
	return f.pr, nil
}

// testEnv is a handler on its own database.
type testEnv struct {
	pool    *pgxpool.Pool
	store   *queue.Store
	handler http.Handler
}

// options tweak a test environment.
type options struct {
	mapper  webhook.MapperConfig
	prs     webhook.PullRequestGetter
	handler webhook.HandlerConfig
	secrets []string
}

func defaultOptions() options {
	return options{
		mapper:  webhook.MapperConfig{BranchPrefix: "gitlease/", BotLogin: botLogin},
		secrets: testSecrets,
	}
}

// newEnv returns a handler over a fresh migrated database.
func newEnv(t *testing.T, opts options) *testEnv {
	t.Helper()
	pool := dbtest.New(t)
	return newEnvOn(t, pool, opts)
}

// newEnvOn returns a handler over pool.
func newEnvOn(tb testing.TB, pool *pgxpool.Pool, opts options) *testEnv {
	tb.Helper()
	if opts.secrets == nil {
		opts.secrets = testSecrets
	}
	store := queue.NewStore(pool, queue.Config{})
	v, err := webhook.NewVerifier(opts.secrets...)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := webhook.NewMapper(opts.prs, opts.mapper)
	if err != nil {
		tb.Fatal(err)
	}
	h := webhook.NewHandler(store, v, m, discardLogger(), opts.handler)
	return &testEnv{pool: pool, store: store, handler: h}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// request is one delivery as GitHub would send it.
type request struct {
	event, delivery string
	body            []byte
	secret          string // signing secret; testSecrets[0] when ""
	contentType     string // application/json when ""
	form            bool   // send form-encoded (payload=<json>)
	signature       string // X-Hub-Signature-256 to send instead of the body's
	mutate          func(r *http.Request)
	ctx             context.Context // the request's context (a caller's span); Background when nil
}

func (rq request) build() *http.Request {
	body := rq.body
	ct := rq.contentType
	if rq.form {
		body = []byte("payload=" + url.QueryEscape(string(body)))
		if ct == "" {
			ct = webhook.ContentTypeForm
		}
	}
	if ct == "" {
		ct = webhook.ContentTypeJSON
	}
	secret := rq.secret
	if secret == "" {
		secret = testSecrets[0]
	}
	r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", ct)
	r.Header.Set("User-Agent", "GitHub-Hookshot/044aadd")
	r.Header.Set(webhook.EventHeader, rq.event)
	r.Header.Set(webhook.DeliveryHeader, rq.delivery)
	r.Header.Set("X-GitHub-Hook-ID", "503311217")
	sig := webhook.Sign([]byte(secret), body)
	if rq.signature != "" {
		sig = rq.signature
	}
	r.Header.Set(webhook.SignatureHeader, sig)
	if rq.mutate != nil {
		rq.mutate(r)
	}
	if rq.ctx != nil {
		r = r.WithContext(rq.ctx)
	}
	return r
}

// post delivers rq and decodes the answer.
func (e *testEnv) post(tb testing.TB, rq request) (int, webhook.Response) {
	tb.Helper()
	return serve(tb, e.handler, rq.build())
}

func serve(tb testing.TB, h http.Handler, r *http.Request) (int, webhook.Response) {
	tb.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var resp webhook.Response
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		tb.Fatalf("answer Content-Type %q, want application/json (body %q)", ct, w.Body.String())
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
		tb.Fatalf("answer is not JSON: %v: %q", err, w.Body.String())
	}
	return w.Code, resp
}

// burst delivers rqs all at once, each from its own goroutine, and
// returns the answers in order.
func (e *testEnv) burst(t *testing.T, rqs []request) []webhook.Response {
	t.Helper()
	answers := make([]webhook.Response, len(rqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, rq := range rqs {
		r := rq.build()
		wg.Go(func() {
			w := httptest.NewRecorder()
			<-start
			e.handler.ServeHTTP(w, r)
			if err := json.Unmarshal(w.Body.Bytes(), &answers[i]); err != nil {
				t.Errorf("answer %d %q: %v", w.Code, w.Body.String(), err)
			}
		})
	}
	close(start)
	wg.Wait()
	return answers
}

// delivery reads a stored delivery row.
func (e *testEnv) delivery(tb testing.TB, id string) dbq.Delivery {
	tb.Helper()
	// A read no product code makes, so it has no sqlc query: the row in
	// column order, which is dbq.Delivery's field order.
	rows, _ := e.pool.Query(context.Background(), "SELECT * FROM deliveries WHERE delivery_id = $1", id)
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[dbq.Delivery])
	if err != nil {
		tb.Fatalf("read delivery %s: %v", id, err)
	}
	return d
}

// count returns the number of rows in table.
func (e *testEnv) count(tb testing.TB, table string) int {
	tb.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		tb.Fatalf("count %s: %v", table, err)
	}
	return n
}

// item reads a queue item back.
func (e *testEnv) item(tb testing.TB, entryID string) queue.Item {
	tb.Helper()
	it, err := e.store.Get(context.Background(), entryID)
	if err != nil {
		tb.Fatalf("get item %s: %v", entryID, err)
	}
	return it
}

// dispatch decodes an item's dispatch and its metadata.
func dispatchOf(tb testing.TB, it queue.Item) (queue.SubjectDispatch, webhook.Metadata) {
	tb.Helper()
	var d queue.SubjectDispatch
	if err := json.Unmarshal(it.Dispatch(), &d); err != nil {
		tb.Fatalf("decode dispatch: %v", err)
	}
	if d.Subject == nil {
		tb.Fatalf("dispatch has no subject: %s", it.Dispatch())
	}
	var m webhook.Metadata
	if err := json.Unmarshal(d.Subject.Metadata, &m); err != nil {
		tb.Fatalf("decode metadata: %v", err)
	}
	return d, m
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, within time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
