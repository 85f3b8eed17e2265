package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

func pullRequestParams(n int, sha string) queue.EnqueueParams {
	meta, _ := json.Marshal(map[string]any{"installation_id": installation, "repository_id": repoID, "repository": repoName,
		"number": n, "html_url": fmt.Sprintf("https://github.com/%s/pull/%d", repoName, n), "head_sha": sha})
	return queue.EnqueueParams{
		Dispatch: queue.SubjectDispatch{Subject: &queue.SubjectRef{Kind: webhook.KindPullRequest, ID: fmt.Sprintf("%d#%d", repoID, n), Metadata: meta},
			WorkflowRef: "coding", TriggerSource: "github:pull_request.opened", RequestedAt: queue.Timestamp{Time: time.Now()}},
		Reservation: &queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: fmt.Sprintf("refs/heads/feature-%d", n)},
		FromGitHub:  true, // as the webhook intake enqueues
	}
}

// TestCleanRunCallsByRoute pins what one item costs on GitHub without
// faults (docs/github.md: at most 7 for an issue item, 3 for a pull-request
// item, token minting aside): create first, never look up.
func TestCleanRunCallsByRoute(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		pr   bool
		want map[githubtest.Kind]int
	}{
		"issue item": {want: map[githubtest.Kind]int{
			githubtest.KindGetRef: 1, githubtest.KindGetCommit: 1, githubtest.KindCreateCommit: 1, githubtest.KindCreateRef: 1,
			githubtest.KindCreatePull: 1, githubtest.KindCreateCheckRun: 1, githubtest.KindUpdateCheckRun: 1,
		}},
		"pull-request item": {pr: true, want: map[githubtest.Kind]int{
			githubtest.KindCreateCheckRun: 1, githubtest.KindUpdateCheckRun: 2,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			p := issueParams(3)
			if tc.pr {
				p = pullRequestParams(3, h.gh.Push(repoName, "feature-3", "a change"))
			}
			if _, err := h.store.Enqueue(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			s := h.sender(t)
			h.drain(t, s)
			fe := h.leaseAll(t, "w1")[0]
			h.drain(t, s)
			h.complete(t, fe, queue.StatusCompleted)
			h.drain(t, s)
			for _, k := range githubtest.Kinds() {
				if k == githubtest.KindAccessToken {
					continue
				}
				if got := h.gh.Count(k); got != tc.want[k] {
					t.Errorf("%s: %d calls, want %d", k, got, tc.want[k])
				}
			}
		})
	}
}

// TestARowResumesAtItsFirstStepNotDone fails branch creation for longer
// than the in-place retries last: the next attempt creates the branch on
// the commit the first one made, and makes no other.
func TestARowResumesAtItsFirstStepNotDone(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.gh.FailNext(githubtest.KindCreateRef, 4, 502) // the first call and its 3 retries
	if _, err := h.store.Enqueue(context.Background(), issueParams(5)); err != nil {
		t.Fatal(err)
	}
	h.leaseAll(t, "w1")
	h.drain(t, h.sender(t))
	for k, want := range map[githubtest.Kind]int{
		githubtest.KindCreateCommit: 1, githubtest.KindGetCommit: 1, githubtest.KindCreateRef: 5, githubtest.KindCreatePull: 1,
	} {
		if got := h.gh.Count(k); got != want {
			t.Errorf("%s: %d calls, want %d", k, got, want)
		}
	}
	var attempts, progress int
	if err := h.pool.QueryRow(context.Background(), `SELECT attempts, progress_attempts FROM outbox WHERE kind = 'provision'`).Scan(&attempts, &progress); err != nil {
		t.Fatal(err)
	}
	if attempts != 2 || progress != 1 {
		t.Errorf("provision row: %d attempts, progress at %d; want 2 and 1 (its backoff started over)", attempts, progress)
	}
}

// TestStartedSendersWakeOnNotify starts two senders that would poll only
// once an hour: items enqueued concurrently afterwards get their check runs
// through the NOTIFY sent after each commit, each exactly once.
func TestStartedSendersWakeOnNotify(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	notifier := service.NewNotifier(h.pool, outbox.OutboxChannel, nil)
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Stop)
	store := queue.NewStore(h.pool, queue.Config{Observer: outbox.NewOutbox(nil, nil).SignalWith(notifier.Signal)})
	inst, err := github.NewInstallations(github.Config{AppID: h.gh.AppID, PrivateKey: h.gh.PrivateKeyPEM, APIURL: h.gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s := outbox.NewSender(h.pool, inst, outbox.SenderConfig{Poll: time.Hour}, nil)
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
	}
	time.Sleep(200 * time.Millisecond) // let both finish their first (empty) round and wait
	sha := h.gh.Push(repoName, "feature", "a change")
	const items = 20
	var wg sync.WaitGroup
	for n := 1; n <= items; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := store.Enqueue(ctx, pullRequestParams(n, sha)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if !h.gh.Wait(30*time.Second, func() bool { return len(h.gh.CheckRuns(repoName)) == items }) {
		t.Fatalf("%d of %d check runs created: the senders did not wake", len(h.gh.CheckRuns(repoName)), items)
	}
	if n := h.gh.Count(githubtest.KindCreateCheckRun); n != items {
		t.Errorf("%d check runs created for %d items", n, items)
	}
}

// TestCheckRunOutputFitsGitHub finishes an item whose worker wrote more
// than GitHub keeps: the strict fake (GitHub's schema: summary at most
// 65,535 characters) accepts the check run, whose summary is cut with a
// note, and which links to the item's dashboard page.
func TestCheckRunOutputFitsGitHub(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	sha := h.gh.Push(repoName, "feature-9", "a change")
	res, err := h.store.Enqueue(ctx, pullRequestParams(9, sha))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := github.NewInstallations(github.Config{AppID: h.gh.AppID, PrivateKey: h.gh.PrivateKeyPEM, APIURL: h.gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	s := outbox.NewSender(h.pool, inst, outbox.SenderConfig{PublicURL: "https://gitlease.example.com/"}, nil)
	fe := h.leaseAll(t, "w1")[0]
	note := strings.Repeat("ü", 40_000) // 80,000 bytes
	if r, err := h.store.Complete(ctx, queue.CompleteParams{Execution: fe.Execution, Status: queue.StatusCompleted, Note: note}); err != nil || r.Outcome != queue.OutcomeApplied {
		t.Fatalf("complete: %+v %v", r, err)
	}
	h.drain(t, s)
	runs := h.gh.CheckRuns(repoName)
	if len(runs) != 1 {
		t.Fatalf("%d check runs", len(runs))
	}
	cr := runs[0]
	// The note keeps its tail (noteText); the summary as a whole is fitted
	// again (fitText, limits_internal_test.go): either way it says it was cut.
	if len(cr.Summary) > 65535 || !utf8.ValidString(cr.Summary) || !strings.Contains(cr.Summary, "was cut") {
		t.Errorf("summary of %d bytes (valid UTF-8 %v), want at most 65535 saying it was cut", len(cr.Summary), utf8.ValidString(cr.Summary))
	}
	if want := "https://gitlease.example.com/ui/items/" + res.EntryID; cr.DetailsURL != want {
		t.Errorf("details_url %q, want %q", cr.DetailsURL, want)
	}
}
