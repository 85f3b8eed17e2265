package redeliver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/redeliver"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

const hookSecret = "whsec-reconcile"

// Intake modes of the gate in front of gitlease's webhook handler.
const (
	intakeUp     int32 = iota // the real handler on the test database
	intakeDown                // serve stopped: the connection is dropped, no HTTP answer
	intakeDBDown              // the real handler on a database that does not answer: 503
	intakeSlow                // the real handler, then a pause past GitHub's timeout
)

// intake is one gitlease webhook endpoint, as GitHub (the fake) reaches it.
type intake struct {
	mode  atomic.Int32
	up    http.Handler
	down  http.Handler // same handler, database unreachable
	pause time.Duration
}

func (in *intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch in.mode.Load() {
	case intakeDown:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("no hijacker")
		}
		conn, _, _ := hj.Hijack()
		conn.Close()
	case intakeDBDown:
		in.down.ServeHTTP(w, r)
	case intakeSlow:
		in.up.ServeHTTP(w, r)
		time.Sleep(in.pause)
	default:
		in.up.ServeHTTP(w, r)
	}
}

// recHarness is gitlease's intake and a fake GitHub delivering to it.
type recHarness struct {
	gh     *githubtest.Server
	pool   *pgxpool.Pool
	intake *intake
	inst   *github.Installations
	url    string // the intake's webhook URL
}

func newIntakeHandler(t *testing.T, pool *pgxpool.Pool) http.Handler {
	t.Helper()
	v, err := webhook.NewVerifier(hookSecret)
	if err != nil {
		t.Fatal(err)
	}
	m, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/"})
	if err != nil {
		t.Fatal(err)
	}
	return webhook.NewHandler(queue.NewStore(pool, queue.Config{}), v, m, nil, webhook.HandlerConfig{Timeout: 500 * time.Millisecond})
}

func newRecHarness(t *testing.T, opts ...githubtest.Option) *recHarness {
	t.Helper()
	gh := githubtest.New(t, opts...)
	pool := dbtest.New(t)
	deadCfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/gitlease?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := pgxpool.NewWithConfig(context.Background(), deadCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	in := &intake{up: newIntakeHandler(t, pool), down: newIntakeHandler(t, dead)}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	gh.SetWebhook(srv.URL+"/webhook", hookSecret)
	inst, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return &recHarness{gh: gh, pool: pool, intake: in, inst: inst, url: srv.URL + "/webhook"}
}

func (h *recHarness) reconciler(t *testing.T, cfg redeliver.ReconcilerConfig) *redeliver.Reconciler {
	t.Helper()
	r, err := redeliver.NewReconciler(h.pool, h.inst, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// issue is an issues delivery for issue number n.
func issue(t *testing.T, action string, n int) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../testdata/payloads/issues-opened.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["action"] = action
	m["issue"].(map[string]any)["number"] = n
	b, _ := json.Marshal(m)
	return b
}

// wantRequestedOnce checks that exactly the guids were requested, once each.
func wantRequestedOnce(t *testing.T, gh *githubtest.Server, guids []string) {
	t.Helper()
	got := gh.RedeliveryRequests()
	for _, g := range guids {
		if got[g] != 1 {
			t.Errorf("delivery %s requested %d times, want 1", g, got[g])
		}
	}
	if len(got) != len(guids) {
		t.Errorf("%d deliveries requested, want %d: %v", len(got), len(guids), got)
	}
}

func (h *recHarness) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := h.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// metricsRecorder is a redeliver.RedeliveryMetrics counting results.
type metricsRecorder struct {
	mu     sync.Mutex
	counts map[string]int
	scans  int
}

func (m *metricsRecorder) Redelivery(result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	m.counts[result]++
}

func (m *metricsRecorder) RedeliveryScan(time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scans++
}

func (m *metricsRecorder) get(result string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[result]
}

// TestReconcilerRecoversMissedDeliveries: deliveries sent while serve is
// stopped (no answer) and while the database is down (503) are recovered
// by two reconcilers scanning at the same time, over and over: every missed
// guid is requested exactly once, every issue is enqueued once, and no
// delivery that succeeded is requested.
func TestReconcilerRecoversMissedDeliveries(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t)
	const stopped, dbDown, fine = 12, 8, 5
	var missed, delivered []string
	n := 0
	deliver := func(mode int32, count int, into *[]string, wantStatus int) {
		h.intake.mode.Store(mode)
		for i := 0; i < count; i++ {
			n++
			a := h.gh.Deliver("issues", issue(t, "opened", n))
			if a.StatusCode != wantStatus {
				t.Fatalf("delivery %d in mode %d recorded %d %q, want %d", n, mode, a.StatusCode, a.Status, wantStatus)
			}
			*into = append(*into, a.GUID)
		}
	}
	deliver(intakeUp, fine, &delivered, http.StatusAccepted)
	deliver(intakeDown, stopped, &missed, 0)
	deliver(intakeDBDown, dbDown, &missed, http.StatusServiceUnavailable)
	h.intake.mode.Store(intakeUp) // serve is back

	metrics := &metricsRecorder{}
	recs := []*redeliver.Reconciler{
		h.reconciler(t, redeliver.ReconcilerConfig{Metrics: metrics}),
		h.reconciler(t, redeliver.ReconcilerConfig{Metrics: metrics}),
	}
	var wg sync.WaitGroup
	for _, r := range recs {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Wait: the scans queue up behind each other and overlap
				// entirely in what they read.
				if _, err := r.Scan(context.Background(), redeliver.ScanOptions{Wait: true}); err != nil {
					t.Errorf("scan: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	h.gh.WaitRedeliveries()

	wantRequestedOnce(t, h.gh, missed) // and none of the delivered ones
	if items := h.count(t, `SELECT count(*) FROM work_items`); items != stopped+dbDown+fine {
		t.Errorf("%d work items, want %d (each issue once)", items, stopped+dbDown+fine)
	}
	if d := h.count(t, `SELECT count(*) FROM deliveries`); d != stopped+dbDown+fine {
		t.Errorf("%d deliveries recorded, want %d", d, stopped+dbDown+fine)
	}
	if metrics.get(redeliver.ResultRequested) != len(missed) {
		t.Errorf("metric requested = %d, want %d", metrics.get(redeliver.ResultRequested), len(missed))
	}

	// A later scan finds every guid recovered and requests nothing more.
	rep, err := recs[0].Scan(context.Background(), redeliver.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(redeliver.ResultRequested) != 0 || len(rep.Findings) != 0 {
		t.Errorf("scan after recovery: %+v", rep.Findings)
	}
	if c := h.gh.Count(githubtest.KindRedeliverHook); c != len(missed) {
		t.Errorf("%d redelivery requests in all, want %d", c, len(missed))
	}
}

// TestReconcilerManyInstances: six reconcilers (six serve instances)
// scanning at once, each several times, skip while another holds the lock
// and between them request each missed guid exactly once.
func TestReconcilerManyInstances(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t, githubtest.WithLatency(2*time.Millisecond))
	h.intake.mode.Store(intakeDown)
	var missed []string
	for i := 1; i <= 10; i++ {
		missed = append(missed, h.gh.Deliver("issues", issue(t, "opened", i)).GUID)
	}
	h.intake.mode.Store(intakeUp)
	var wg sync.WaitGroup
	var skipped atomic.Int32
	start := make(chan struct{})
	for range 6 {
		r := h.reconciler(t, redeliver.ReconcilerConfig{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range 4 {
				rep, err := r.Scan(context.Background(), redeliver.ScanOptions{})
				if err != nil {
					t.Errorf("scan: %v", err)
				}
				if rep.Skipped {
					skipped.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	h.gh.WaitRedeliveries()
	wantRequestedOnce(t, h.gh, missed)
	t.Logf("%d of 24 scans skipped: another held the lock", skipped.Load())
}

// TestRedeliveryClaimIsExclusive: the per-guid claim is a compare-and-swap
// that holds without the scan lock (a scan whose lock session died): of 20
// concurrent claims of one attempt exactly one wins, and a newer attempt can
// be claimed again, never more than MaxRedeliveryRequests times.
func TestRedeliveryClaimIsExclusive(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	q := dbq.New()
	now := time.Now()
	for attempt := int64(1); attempt <= 5; attempt++ {
		var wg sync.WaitGroup
		var won atomic.Int32
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := q.RedeliveryClaim(context.Background(), pool, dbq.RedeliveryClaimParams{
					Guid: "g-1", Event: "issues", AttemptID: attempt, Now: now, StaleBefore: now.Add(-time.Hour),
				})
				switch {
				case err == nil:
					won.Add(1)
				case !errors.Is(err, pgx.ErrNoRows):
					t.Errorf("claim: %v", err)
				}
			}()
		}
		wg.Wait()
		want := int32(1)
		if attempt > redeliver.MaxRedeliveryRequests {
			want = 0
		}
		if won.Load() != want {
			t.Fatalf("attempt %d: %d claims won, want %d", attempt, won.Load(), want)
		}
		if err := q.RedeliverySetResult(context.Background(), pool, dbq.RedeliverySetResultParams{Guid: "g-1", Result: redeliver.ResultRequested, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRedeliveryClaimStale: a claim whose answer was never recorded (its
// process died) blocks other claims until it is stale, then one may take
// it over.
func TestRedeliveryClaimStale(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	q := dbq.New()
	claimed := time.Now()
	claim := func(now time.Time) error {
		_, err := q.RedeliveryClaim(context.Background(), pool, dbq.RedeliveryClaimParams{
			Guid: "g-stale", Event: "issues", AttemptID: 1, Now: now, StaleBefore: now.Add(-10 * time.Minute),
		})
		return err
	}
	if err := claim(claimed); err != nil {
		t.Fatal(err)
	}
	if err := claim(claimed.Add(time.Minute)); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("a fresh claim was taken over: %v", err)
	}
	if err := claim(claimed.Add(11 * time.Minute)); err != nil {
		t.Fatalf("a stale claim was not taken over: %v", err)
	}
}

// TestReconcilerSkipsRejected: deliveries gitlease answered 401 (GitHub
// signing with a secret gitlease does not know) are shown, counted once and
// not requested, until --include-rejected after the secret is fixed.
func TestReconcilerSkipsRejected(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t)
	h.gh.SetWebhook(h.url, "a secret gitlease does not know")
	var rejected []string
	for i := 1; i <= 4; i++ {
		a := h.gh.Deliver("issues", issue(t, "opened", i))
		if a.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong-secret delivery recorded %d", a.StatusCode)
		}
		rejected = append(rejected, a.GUID)
	}
	h.gh.SetWebhook(h.url, hookSecret) // the secret is fixed
	metrics := &metricsRecorder{}
	r := h.reconciler(t, redeliver.ReconcilerConfig{Metrics: metrics})
	for range 2 {
		rep, err := r.Scan(context.Background(), redeliver.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Count(redeliver.ResultRejectedSkipped) != len(rejected) {
			t.Fatalf("findings %+v, want %d rejected_skipped", rep.Findings, len(rejected))
		}
	}
	if c := h.gh.Count(githubtest.KindRedeliverHook); c != 0 {
		t.Fatalf("%d redelivery requests for rejected deliveries, want 0", c)
	}
	if m := metrics.get(redeliver.ResultRejectedSkipped); m != len(rejected) {
		t.Fatalf("rejected_skipped counted %d times, want %d (once per guid)", m, len(rejected))
	}
	rep, err := r.Scan(context.Background(), redeliver.ScanOptions{Since: time.Hour, IncludeRejected: true, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	h.gh.WaitRedeliveries()
	if rep.Count(redeliver.ResultRequested) != len(rejected) {
		t.Fatalf("include-rejected findings %+v", rep.Findings)
	}
	if items := h.count(t, `SELECT count(*) FROM work_items`); items != len(rejected) {
		t.Fatalf("%d items after include-rejected, want %d", items, len(rejected))
	}
	wantRequestedOnce(t, h.gh, rejected)
}

// TestReconcilerIgnoresIrrelevant: events gitlease does not act on are
// never requested, however they failed; "labeled" only with a trigger
// label.
func TestReconcilerIgnoresIrrelevant(t *testing.T) {
	t.Parallel()
	for _, labelTrigger := range []bool{false, true} {
		t.Run(fmt.Sprintf("trigger label %v", labelTrigger), func(t *testing.T) {
			t.Parallel()
			h := newRecHarness(t)
			h.intake.mode.Store(intakeDown)
			h.gh.Deliver("push", []byte(`{"ref":"refs/heads/main","installation":{"id":1}}`))
			h.gh.Deliver("check_suite", []byte(`{"action":"completed","installation":{"id":1}}`))
			h.gh.Deliver("star", []byte(`{"action":"created"}`))
			labeled := h.gh.Deliver("issues", issue(t, "labeled", 7))
			h.intake.mode.Store(intakeUp)
			rep, err := h.reconciler(t, redeliver.ReconcilerConfig{LabelTrigger: labelTrigger}).Scan(context.Background(), redeliver.ScanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h.gh.WaitRedeliveries()
			want := 0
			if labelTrigger {
				want = 1
			}
			if got := h.gh.RedeliveryRequests(); got[labeled.GUID] != want || len(got) != want {
				t.Fatalf("requests %v, want only the labeled delivery %d times", got, want)
			}
			if rep.Count(redeliver.OutcomeIrrelevant) != 4-want {
				t.Fatalf("findings %+v, want %d irrelevant", rep.Findings, 4-want)
			}
		})
	}
}

// TestReconcilerWindow: an attempt 4 days old is never requested, and
// paging stops at the window: the scan reads only the pages it needs.
func TestReconcilerWindow(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t)
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.Add(-96 * time.Hour).UnixNano())
	h.gh.SetHookClock(func() time.Time { return time.Unix(0, clock.Load()) })
	h.intake.mode.Store(intakeDown)
	old := h.gh.Deliver("issues", issue(t, "opened", 1))
	clock.Store(now.Add(-5 * time.Hour).UnixNano())
	for i := 0; i < 150; i++ { // older than the lookback below
		h.gh.AddHookAttempt(githubtest.HookAttempt{GUID: fmt.Sprintf("g5h-%d", i), Event: "issues", Action: "opened", Status: "failed to connect"}, issue(t, "opened", 100+i))
	}
	clock.Store(now.Add(-time.Hour).UnixNano())
	for i := 0; i < 250; i++ { // within it, all delivered fine
		h.gh.AddHookAttempt(githubtest.HookAttempt{GUID: fmt.Sprintf("g1h-%d", i), Event: "issues", Action: "opened", Status: "OK", StatusCode: 202}, nil)
	}
	missed := h.gh.Deliver("issues", issue(t, "opened", 2))
	clock.Store(now.UnixNano())
	h.gh.SetHookClock(nil)
	h.intake.mode.Store(intakeUp)

	r := h.reconciler(t, redeliver.ReconcilerConfig{Lookback: 3 * time.Hour})
	rep, err := r.Scan(context.Background(), redeliver.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.gh.WaitRedeliveries()
	// 251 attempts in the window: pages of 100, 100 and 51+49 older.
	if rep.Pages != 3 || h.gh.Count(githubtest.KindListHookDeliveries) != 3 || rep.Attempts != 251 {
		t.Fatalf("scan read %d pages (%d list calls), %d attempts; want 3 pages, 251 attempts",
			rep.Pages, h.gh.Count(githubtest.KindListHookDeliveries), rep.Attempts)
	}
	got := h.gh.RedeliveryRequests()
	if got[missed.GUID] != 1 || len(got) != 1 {
		t.Fatalf("requests %v, want only %s once", got, missed.GUID)
	}
	// Even an operator's scan of the whole 72 hours never reaches the
	// 4-day-old attempt (the fake reports a violation if it is requested).
	rep, err = r.Scan(context.Background(), redeliver.ScanOptions{Since: 1000 * time.Hour, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.GUID == old.GUID {
			t.Fatalf("the 4-day-old attempt was found: %+v", f)
		}
	}
	if c := h.gh.Count(githubtest.KindRedeliverHook); c != 1+150 {
		t.Fatalf("%d redelivery requests, want %d (the missed one, then the 150 five hours old)", c, 151)
	}
}

// TestReconcilerGitHubRefuses: a 422 is recorded and never retried.
func TestReconcilerGitHubRefuses(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t)
	h.intake.mode.Store(intakeDown)
	a := h.gh.Deliver("issues", issue(t, "opened", 1))
	h.intake.mode.Store(intakeUp)
	h.gh.FailNext(githubtest.KindRedeliverHook, 1, http.StatusUnprocessableEntity)
	metrics := &metricsRecorder{}
	r := h.reconciler(t, redeliver.ReconcilerConfig{Metrics: metrics})
	for i := range 3 {
		rep, err := r.Scan(context.Background(), redeliver.ScanOptions{Since: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 1 || rep.Findings[0].Outcome != redeliver.ResultGitHubRefused {
			t.Fatalf("scan %d findings %+v", i, rep.Findings)
		}
	}
	if c := h.gh.Count(githubtest.KindRedeliverHook); c != 1 {
		t.Fatalf("%d requests, want 1", c)
	}
	if metrics.get(redeliver.ResultGitHubRefused) != 1 {
		t.Fatalf("github_refused counted %d", metrics.get(redeliver.ResultGitHubRefused))
	}
	if n := h.count(t, `SELECT count(*) FROM redeliveries WHERE guid = $1 AND result = 'github_refused'`, a.GUID); n != 1 {
		t.Fatal("422 not recorded")
	}
}

// TestReconcilerGivesUp: a delivery that keeps failing is requested again
// for each newer failed attempt, three times, then recorded unrecoverable.
func TestReconcilerGivesUp(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t)
	h.intake.mode.Store(intakeDown) // and it stays down
	a := h.gh.Deliver("issues", issue(t, "opened", 1))
	metrics := &metricsRecorder{}
	r := h.reconciler(t, redeliver.ReconcilerConfig{Metrics: metrics})
	var outcomes []string
	for range 5 {
		rep, err := r.Scan(context.Background(), redeliver.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h.gh.WaitRedeliveries()
		outcomes = append(outcomes, rep.Findings[0].Outcome)
	}
	want := []string{"requested", "requested", "requested", "unrecoverable", "unrecoverable"}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	if got := h.gh.RedeliveryRequests()[a.GUID]; got != redeliver.MaxRedeliveryRequests {
		t.Fatalf("%d requests, want %d", got, redeliver.MaxRedeliveryRequests)
	}
	if metrics.get(redeliver.ResultUnrecoverable) != 1 || metrics.get(redeliver.ResultRequested) != 3 {
		t.Fatalf("metrics %v", metrics.counts)
	}
	recent, err := redeliver.RecentRedeliveries(context.Background(), h.pool, time.Now().Add(-time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recent) != 1 || recent[0].GUID != a.GUID || recent[0].Result != redeliver.ResultUnrecoverable || recent[0].Requests != 3 {
		t.Fatalf("recent redeliveries %+v", recent)
	}
	sum, err := r.Summary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.LastScan.IsZero() || sum.Missed != 1 || sum.Redelivered != 0 || sum.Unrecoverable != 1 {
		t.Fatalf("summary %+v, want one missed guid, unrecoverable, and a last scan", sum)
	}
}

// TestReconcilerCommittedTimeout: a delivery gitlease committed but whose
// answer GitHub recorded as a timeout is not requested; nor is anything
// during a dry run.
func TestReconcilerCommittedTimeout(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t)
	h.intake.pause = 300 * time.Millisecond
	h.gh.SetHookTimeout(100 * time.Millisecond)
	h.intake.mode.Store(intakeSlow)
	a := h.gh.Deliver("issues", issue(t, "opened", 1))
	if a.StatusCode != 0 || a.Status != "timed out" {
		t.Fatalf("slow answer recorded %+v", a)
	}
	h.intake.mode.Store(intakeDown)
	b := h.gh.Deliver("issues", issue(t, "opened", 2))
	h.intake.mode.Store(intakeUp)
	r := h.reconciler(t, redeliver.ReconcilerConfig{})
	dry, err := r.Scan(context.Background(), redeliver.ScanOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Count(redeliver.OutcomeWouldRequest) != 1 || dry.Count(redeliver.OutcomeRecorded) != 1 || h.gh.Count(githubtest.KindRedeliverHook) != 0 {
		t.Fatalf("dry run findings %+v", dry.Findings)
	}
	if n := h.count(t, `SELECT count(*) FROM redeliveries`) + h.count(t, `SELECT count(*) FROM redelivery_scans`); n != 0 {
		t.Fatalf("dry run wrote %d rows", n)
	}
	rep, err := r.Scan(context.Background(), redeliver.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.gh.WaitRedeliveries()
	if got := h.gh.RedeliveryRequests(); len(got) != 1 || got[b.GUID] != 1 {
		t.Fatalf("requests %v (findings %+v), want only %s", got, rep.Findings, b.GUID)
	}
}

func TestNewReconcilerRefusesLongLookback(t *testing.T) {
	t.Parallel()
	if _, err := redeliver.NewReconciler(nil, nil, redeliver.ReconcilerConfig{Lookback: 73 * time.Hour}, nil); err == nil {
		t.Fatal("a 73h lookback was accepted")
	}
}

// TestReconcilerEnterpriseWindow: GitHub Enterprise Server keeps its
// delivery log 7 days, and a reconciler configured with that retention
// redelivers a 5-day-old miss there; one configured for github.com's 3
// days pages no further back than those.
func TestReconcilerEnterpriseWindow(t *testing.T) {
	t.Parallel()
	h := newRecHarness(t, githubtest.Enterprise())
	now := time.Now()
	h.gh.SetHookClock(func() time.Time { return now.Add(-5 * 24 * time.Hour) })
	h.intake.mode.Store(intakeDown)
	missed := h.gh.Deliver("issues", issue(t, "opened", 1))
	h.gh.SetHookClock(nil)
	h.intake.mode.Store(intakeUp)

	short := h.reconciler(t, redeliver.ReconcilerConfig{})
	rep, err := short.Scan(context.Background(), redeliver.ScanOptions{Since: redeliver.MaxRedeliverLookback, DryRun: true})
	if err != nil || len(rep.Findings) != 0 {
		t.Fatalf("a 3-day scan found %+v (%v), want nothing", rep.Findings, err)
	}
	if _, err := redeliver.NewReconciler(h.pool, h.inst, redeliver.ReconcilerConfig{Lookback: 169 * time.Hour, LogRetention: redeliver.EnterpriseLogRetention}, nil); err == nil {
		t.Fatal("a lookback past GHES's 7 days was accepted")
	}
	r := h.reconciler(t, redeliver.ReconcilerConfig{Lookback: redeliver.EnterpriseLogRetention, LogRetention: redeliver.EnterpriseLogRetention})
	if _, err := r.Scan(context.Background(), redeliver.ScanOptions{}); err != nil {
		t.Fatal(err)
	}
	h.gh.WaitRedeliveries()
	wantRequestedOnce(t, h.gh, []string{missed.GUID})
}
