package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// gitHubBench is serve's GitHub side against the fake: the queue with the
// outbox (signalling its sender after each commit), the sender, and the
// built-in worker without a command.
type gitHubBench struct {
	fake  *githubtest.Server
	store *queue.Store
	n     int
}

func newGitHubBench(b *testing.B, writesPerSec float64) *gitHubBench {
	return newGitHubBenchWith(b, writesPerSec, WorkerConfig{})
}

// newGitHubBenchWith is newGitHubBench with the worker's command and
// progress settings of wc.
func newGitHubBenchWith(b *testing.B, writesPerSec float64, wc WorkerConfig) *gitHubBench {
	b.Helper()
	fake := githubtest.New(b, githubtest.ForbidRefUpdates())
	fake.AddRepo("octo", "widgets", 1296269, "main", true)
	fake.AddInstallation(4242, "octo/widgets")
	pool := dbtest.New(b)
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	outboxNotifier := service.NewNotifier(pool, outbox.OutboxChannel, logger)
	workNotifier := NewNotifier(pool, logger)
	for _, n := range []*service.Notifier{outboxNotifier, workNotifier} {
		if err := n.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(n.Stop)
	}
	store := queue.NewStore(pool, queue.Config{LeaseTTL: time.Minute, OnPending: workNotifier.Signal,
		Observer: outbox.NewOutbox(nil, logger).SignalWith(outboxNotifier.Signal), Views: outbox.NewItems(pool)})
	inst, err := github.NewInstallations(github.Config{AppID: fake.AppID, PrivateKey: fake.PrivateKeyPEM, APIURL: fake.URL(), WritesPerSec: writesPerSec})
	if err != nil {
		b.Fatal(err)
	}
	sender := outbox.NewSender(pool, inst, outbox.SenderConfig{}, logger)
	if err := sender.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sender.Stop)
	wc.OwnerID, wc.Slots = BuiltinOwnerPrefix+"bench-"+uuid.NewString()[:8], 5
	if wc.ProgressInterval > 0 {
		wc.Progress = outbox.NewProgress(pool, inst, "")
	}
	w, err := NewWorker(store, pool, inst, wc, logger)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	return &gitHubBench{fake: fake, store: store}
}

// enqueue commits one issue item (pr: a pull-request item), as a delivery's
// transaction does, and returns its entry ID.
func (g *gitHubBench) enqueue(b *testing.B, pr bool) string {
	g.n++
	n := g.n
	kind, res := webhook.KindIssue, &queue.Reservation{Repository: "octo/widgets", BaseRef: "refs/heads/main", HeadRef: fmt.Sprintf("refs/heads/gitlease/issue-%d", n)}
	md := map[string]any{"installation_id": 4242, "repository_id": 1296269, "repository": "octo/widgets", "number": n}
	if pr {
		kind = webhook.KindPullRequest
		sha, _ := g.fake.Branch("octo/widgets", "main")
		md["head_sha"] = sha
		res.HeadRef = fmt.Sprintf("refs/heads/feature-%d", n)
	}
	meta, _ := json.Marshal(md)
	r, err := g.store.Enqueue(context.Background(), queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{
			Subject:     &queue.SubjectRef{Kind: kind, ID: fmt.Sprintf("1296269#%d", n), Title: fmt.Sprintf("Thing %d", n), Metadata: meta},
			WorkflowRef: "coding", TriggerSource: "github:issues.opened", RequestedAt: queue.Timestamp{Time: time.Now()},
		},
		Reservation: res,
		FromGitHub:  true, // as the webhook intake enqueues: only such items get check runs
	})
	if err != nil {
		b.Fatal(err)
	}
	return r.EntryID
}

// waitFor polls the fake until cond holds and returns when it first did.
func waitFor(b *testing.B, what string, cond func() bool) time.Time {
	deadline := time.Now().Add(5 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("never: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return time.Now()
}

func (g *gitHubBench) completed(entry string) bool {
	for _, cr := range g.fake.CheckRuns("octo/widgets") {
		if cr.ExternalID == entry && cr.Status == "completed" {
			return true
		}
	}
	return false
}

func (g *gitHubBench) hasPR(n int) bool {
	for _, p := range g.fake.PullRequests("octo/widgets") {
		if p.Head == fmt.Sprintf("gitlease/issue-%d", n) {
			return true
		}
	}
	return false
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// reportCalls reports GitHub calls per item by route, token minting aside.
func (g *gitHubBench) reportCalls(b *testing.B, items int) {
	total := 0
	var parts []string
	for _, k := range githubtest.Kinds() {
		if k == githubtest.KindAccessToken {
			continue
		}
		if n := g.fake.Count(k); n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%s=%.1f", k, float64(n)/float64(items)))
		}
	}
	b.ReportMetric(float64(total)/float64(items), "calls/item")
	b.Logf("calls per item by route: %s; started while rate-limited: %d", strings.Join(parts, " "), g.fake.EarlyCalls())
}

// reportLatency reports the p50 and p99 of ds as ms-to-<what>-p50/-p99.
func reportLatency(b *testing.B, what string, ds []time.Duration) {
	b.ReportMetric(float64(quantile(ds, 0.5).Milliseconds()), "ms-to-"+what+"-p50")
	b.ReportMetric(float64(quantile(ds, 0.99).Milliseconds()), "ms-to-"+what+"-p99")
}

// BenchmarkIssueItemOnGitHub runs issue items one after another through
// serve's GitHub side: delivery commit → draft pull request open, and →
// check run completed, p50 and p99, and GitHub calls per item.
func BenchmarkIssueItemOnGitHub(b *testing.B) { benchIssueItems(b, 0, 0) }

// BenchmarkIssueItemOnGitHubPaced is the same with writes paced at the
// default GITLEASE_GITHUB_WRITES_PER_SEC, 1: after the burst of 5, each
// item's five writes take about five seconds.
func BenchmarkIssueItemOnGitHubPaced(b *testing.B) { benchIssueItems(b, 1, 0) }

// BenchmarkIssueItemOnGitHubPacedIdle paces writes at 1 a second too, but
// lets the burst refill between items (6 s apart): a delivery to an idle
// installation.
func BenchmarkIssueItemOnGitHubPacedIdle(b *testing.B) { benchIssueItems(b, 1, 6*time.Second) }

func benchIssueItems(b *testing.B, writesPerSec float64, apart time.Duration) {
	g := newGitHubBench(b, writesPerSec)
	var toPR, toDone []time.Duration
	for b.Loop() {
		time.Sleep(apart)
		start := time.Now()
		entry := g.enqueue(b, false)
		n := g.n
		toPR = append(toPR, waitFor(b, "draft pull request", func() bool { return g.hasPR(n) }).Sub(start))
		toDone = append(toDone, waitFor(b, "check run completed", func() bool { return g.completed(entry) }).Sub(start))
	}
	reportLatency(b, "PR", toPR)
	reportLatency(b, "done", toDone)
	g.reportCalls(b, len(toDone))
}

// BenchmarkPullRequestItemOnGitHub is the same for pull-request items.
func BenchmarkPullRequestItemOnGitHub(b *testing.B) { benchToDone(b, true, nil) }

// BenchmarkIssueItemUnder502s fails the first three calls of every route
// with 502 for each item: the time from its delivery to its completed
// check run.
func BenchmarkIssueItemUnder502s(b *testing.B) {
	benchToDone(b, false, func(fake *githubtest.Server) { fake.FailEach(3, 502) })
}

// benchToDone runs items (pr: pull-request items) one after another, each
// after faults (if any) were set up, and reports delivery → completed check
// run.
func benchToDone(b *testing.B, pr bool, faults func(*githubtest.Server)) {
	g := newGitHubBench(b, 0)
	var toDone []time.Duration
	for b.Loop() {
		if faults != nil {
			faults(g.fake)
		}
		start := time.Now()
		entry := g.enqueue(b, pr)
		toDone = append(toDone, waitFor(b, "check run completed", func() bool { return g.completed(entry) }).Sub(start))
		g.fake.ClearFaults()
	}
	reportLatency(b, "done", toDone)
	g.reportCalls(b, len(toDone))
}

// BenchmarkIssueItemsUnderRateLimits sends 5 issue items at once into an
// installation that GitHub answers with one secondary limit (Retry-After
// 2 s) and then one primary limit (reset 3 s later): the calls started while
// the installation was limited (EarlyCalls, which must stay 0) and the time
// until all 5 check runs completed.
func BenchmarkIssueItemsUnderRateLimits(b *testing.B) {
	g := newGitHubBench(b, 0)
	var toDone []time.Duration
	for b.Loop() {
		g.fake.SecondaryRateLimit(githubtest.AnyKind, 1, 2)
		start := time.Now()
		var entries []string
		for range 5 {
			entries = append(entries, g.enqueue(b, false))
		}
		time.Sleep(50 * time.Millisecond)
		g.fake.PrimaryRateLimit(1, 3*time.Second)
		for _, e := range entries {
			waitFor(b, "check run completed", func() bool { return g.completed(e) })
		}
		toDone = append(toDone, time.Since(start))
		g.fake.ClearFaults()
	}
	b.ReportMetric(float64(g.fake.EarlyCalls()), "early-calls")
	reportLatency(b, "all-done", toDone)
	g.reportCalls(b, 5*len(toDone))
}

// BenchmarkIssueItemConsoleCalls counts every GitHub call (token minting
// included) an issue item costs whose command runs 12 s printing a line
// every 100 ms, with progress every 3 s: the default 30 s interval over a
// 2-minute command, scaled down ten times (the calls depend on how many
// intervals the run spans, not on their length). It reports progress
// updates per item, the calls of the command's own token (minted for the
// item and revoked after it) and every other call per item.
func BenchmarkIssueItemConsoleCalls(b *testing.B) {
	g := newGitHubBenchWith(b, 1, WorkerConfig{
		Exec:             `i=0; while [ $i -lt 120 ]; do i=$((i+1)); echo "line $i"; sleep 0.1; done`,
		ProgressInterval: 3 * time.Second,
	})
	items := 0
	for b.Loop() {
		entry := g.enqueue(b, false)
		waitFor(b, "check run completed", func() bool { return g.completed(entry) })
		items++
	}
	progress := 0
	for _, cr := range g.fake.CheckRuns("octo/widgets") {
		for _, w := range cr.Writes {
			if w.Status == "in_progress" && w.SetsText {
				progress++
			}
		}
	}
	tokens := g.fake.Count(githubtest.KindAccessToken) + g.fake.Count(githubtest.KindRevokeToken)
	other := len(g.fake.Requests()) - tokens - progress
	g.reportCalls(b, items) // calls/item: all but token minting
	b.ReportMetric(float64(progress)/float64(items), "progress/item")
	b.ReportMetric(float64(tokens)/float64(items), "token-calls/item")
	b.ReportMetric(float64(other)/float64(items), "other-calls/item")
}
