package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
)

const (
	adminToken = "admin-token-for-tests"
	viewToken  = "view-token-for-tests"
)

// clock is a clock tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// fixture is a dashboard over a fresh migrated database, served by httptest.
type fixture struct {
	t     testing.TB
	pool  *pgxpool.Pool
	store *queue.Store
	ui    *UI
	srv   *httptest.Server
	clk   *clock
	q     *dbq.Queries
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	pool := dbtest.New(t)
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	box := outbox.NewOutbox(clk.Now, nil)
	store := queue.NewStore(pool, queue.Config{Now: clk.Now, Observer: box, Views: outbox.NewItems(pool)})
	cfg.Now = clk.Now
	u, err := New(pool, store, box, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, pool: pool, store: store, ui: u, srv: serve(t, u), clk: clk, q: dbq.New()}
}

// serve serves u's routes on a test server closed when the test ends.
func serve(t testing.TB, u *UI) *httptest.Server {
	e := echo.New()
	u.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

func adminConfig() Config { return Config{AdminToken: adminToken, ViewToken: viewToken} }

// enqueue adds an issue item of repo (owner/name) number n and returns its entry ID.
func (f *fixture) enqueue(kind, repo string, n int) string {
	f.t.Helper()
	path := "issues"
	h := fnv.New32a()
	h.Write([]byte(repo))
	repoID := int64(h.Sum32())
	meta := map[string]any{"installation_id": 7, "repository_id": repoID, "repository": repo, "number": n}
	if kind == "github_pull_request" {
		path = "pull"
		meta["head_sha"] = fmt.Sprintf("%040x", n)
	}
	meta["html_url"] = fmt.Sprintf("https://github.com/%s/%s/%d", repo, path, n)
	b, _ := json.Marshal(meta)
	res, err := f.store.Enqueue(context.Background(), queue.EnqueueParams{Dispatch: queue.SubjectDispatch{
		Subject:     &queue.SubjectRef{Kind: kind, ID: fmt.Sprintf("%d#%d", repoID, n), Title: "t", Metadata: b},
		WorkflowRef: "coding", TriggerSource: "test", RequestedAt: queue.Timestamp{Time: f.clk.Now()},
	}, FromGitHub: true}) // as the webhook intake enqueues
	if err != nil || !res.Enqueued {
		f.t.Fatalf("enqueue %s %d: %+v %v", repo, n, res, err)
	}
	f.clk.Advance(time.Second) // distinct enqueue times, newest first is well defined
	return res.EntryID
}

// deliver records a delivery with an outcome naming entry (if any).
func (f *fixture) deliver(id, event, outcome, entry string) {
	f.t.Helper()
	ctx := context.Background()
	repo, action := "acme/widgets", "opened"
	if _, err := f.q.DeliveryRecord(ctx, f.pool, dbq.DeliveryRecordParams{DeliveryID: id, Event: event, Action: &action,
		Repository: &repo, Sender: new("octocat"), SecretIndex: 1, BodySha256: "x", Now: f.clk.Now(), Outcome: "received"}); err != nil {
		f.t.Fatal(err)
	}
	p := dbq.DeliverySetOutcomeParams{DeliveryID: id, Outcome: outcome}
	if entry != "" {
		e := uuid.MustParse(entry)
		it, err := f.store.Get(ctx, entry)
		if err != nil {
			f.t.Fatal(err)
		}
		p.EntryID, p.QualifiedID, p.Generation = &e, new(it.QualifiedID()), new(int64(it.Generation()))
	}
	if err := f.q.DeliverySetOutcome(ctx, f.pool, p); err != nil {
		f.t.Fatal(err)
	}
}

// browser is an HTTP client with its own cookies that does not follow redirects.
type browser struct {
	f *fixture
	c *http.Client
}

func (f *fixture) anonymous() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{f: f, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn returns a browser signed in with token.
func (f *fixture) signIn(token string) *browser {
	f.t.Helper()
	b := f.anonymous()
	if r := b.post("/ui/login", url.Values{"token": {token}}); r.code != http.StatusSeeOther {
		f.t.Fatalf("sign in: %d %s", r.code, r.body)
	}
	return b
}

type answer struct {
	code     int
	body     string
	location string
	header   http.Header
}

func (b *browser) do(req *http.Request) answer {
	b.f.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, body: string(body), location: resp.Header.Get("Location"), header: resp.Header}
}

func (b *browser) get(path string) answer {
	req, _ := http.NewRequest(http.MethodGet, b.f.srv.URL+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) answer {
	req, _ := http.NewRequest(http.MethodPost, b.f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token the overview's forms carry.
func (b *browser) csrf() string {
	b.f.t.Helper()
	m := csrfRE.FindStringSubmatch(b.get("/ui/").body)
	if m == nil {
		b.f.t.Fatal("no CSRF token on the overview")
	}
	return m[1]
}

// audit returns the item's audit log.
func (f *fixture) audit(entry string) []dbq.UIWorkItemAuditRow {
	f.t.Helper()
	rows, err := f.q.UIWorkItemAudit(context.Background(), f.pool, uuid.MustParse(entry))
	if err != nil {
		f.t.Fatal(err)
	}
	return rows
}

func (f *fixture) status(entry string) string {
	f.t.Helper()
	it, err := f.store.Get(context.Background(), entry)
	if err != nil {
		f.t.Fatal(err)
	}
	return it.Status()
}

// pendingOutbox counts the GitHub writes not yet sent.
func (f *fixture) pendingOutbox() int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE status = 'pending'`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}
