package outbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

const helloWorld = "octocat/Hello-World"

// newIntakeHarness is a harness for octocat/Hello-World (installation
// 2311213) with a webhook intake that knows the fake's App ID.
func newIntakeHarness(t *testing.T) (*harness, *webhook.Handler) {
	t.Helper()
	gh := githubtest.New(t, githubtest.ForbidRefUpdates())
	gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	gh.AddInstallation(2311213, helloWorld)
	gh.ReserveNumbers(helloWorld, 2000)
	h := &harness{gh: gh, pool: dbtest.New(t), outbox: outbox.NewOutbox(nil, nil)}
	items := outbox.NewItems(h.pool)
	h.store = queue.NewStore(h.pool, queue.Config{Observer: h.outbox, Views: items})
	verifier, _ := webhook.NewVerifier(secret)
	mapper, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/", BotLogin: "gitlease[bot]", AppID: gh.AppID})
	if err != nil {
		t.Fatal(err)
	}
	return h, webhook.NewHandler(h.store, verifier, mapper, nil, webhook.HandlerConfig{OnOutcome: h.outbox.DeliveryFeedback, CheckSuites: items})
}

func checkRunsOf(gh *githubtest.Server, entry string) []githubtest.CheckRun {
	var out []githubtest.CheckRun
	for _, cr := range gh.CheckRuns(helloWorld) {
		if cr.ExternalID == entry {
			out = append(out, cr)
		}
	}
	return out
}

// TestRerunEnqueuesANewGeneration presses GitHub's Re-run on a pull
// request item's finished check run, then on its check suite: each starts
// a new generation with its own check run on the pull request's head; a
// Re-run while a generation is live is a subject collision; another App's
// check run and an unknown entry are ignored.
func TestRerunEnqueuesANewGeneration(t *testing.T) {
	t.Parallel()
	h, intake := newIntakeHarness(t)
	head := h.gh.Push(helloWorld, "fix-greeting", "a greeting fix")
	withHead := func(m map[string]any) {
		pr := m["pull_request"].(map[string]any)
		pr["head"].(map[string]any)["sha"] = head
	}
	first := deliver(t, intake, "pull_request", "d-1", "pull_request-opened.json", withHead)
	if first.Outcome != webhook.OutcomeEnqueued {
		t.Fatalf("pull request opened: %+v", first)
	}
	finish := func() {
		t.Helper()
		h.drain(t, h.sender(t))
		for _, fe := range h.leaseAll(t, "w1") {
			h.complete(t, fe, queue.StatusCompleted)
		}
		h.drain(t, h.sender(t))
	}
	finish()

	runID := func(entry string) float64 {
		if runs := checkRunsOf(h.gh, entry); len(runs) > 0 {
			return float64(runs[0].ID)
		}
		return 1
	}
	rerun := func(entry string, appID float64) func(m map[string]any) {
		return func(m map[string]any) {
			cr := m["check_run"].(map[string]any)
			cr["external_id"], cr["head_sha"], cr["id"] = entry, head, runID(entry)
			cr["app"].(map[string]any)["id"] = appID
			cr["pull_requests"].([]any)[0].(map[string]any)["head"].(map[string]any)["sha"] = head
		}
	}
	app := float64(h.gh.AppID)
	second := deliver(t, intake, "check_run", "d-2", "check_run-rerequested.json", rerun(first.EntryID, app))
	if second.Outcome != webhook.OutcomeEnqueued || second.QualifiedID != first.QualifiedID || second.Generation == nil || *second.Generation != 2 {
		t.Fatalf("Re-run of the finished check run: %+v, want generation 2 of %s", second, first.QualifiedID)
	}
	if r := deliver(t, intake, "check_run", "d-3", "check_run-rerequested.json", rerun(first.EntryID, app)); r.Outcome != webhook.OutcomeSubjectCollision || r.EntryID != second.EntryID {
		t.Fatalf("Re-run while generation 2 is live: %+v, want a subject collision naming %s", r, second.EntryID)
	}
	rpcEntry, err := h.store.Enqueue(context.Background(), queue.EnqueueParams{IdempotencyKey: "rpc-1", Dispatch: queue.SubjectDispatch{
		Subject: &queue.SubjectRef{Kind: webhook.KindPullRequest, ID: "1296269#77",
			Metadata: []byte(`{"installation_id":2311213,"repository_id":1296269,"repository":"octocat/Hello-World","number":77}`)},
		WorkflowRef: "coding", TriggerSource: "rpc", RequestedAt: queue.Timestamp{Time: time.Now().UTC().Truncate(time.Second)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func(m map[string]any){
		"another-app":   rerun(first.EntryID, app+1),
		"unknown-entry": rerun("8f1c2d6e-0000-4000-8000-000000000000", app),
		"not-an-entry":  rerun("ci-build-77", app),
		"another-check-run": func(m map[string]any) {
			rerun(first.EntryID, app)(m)
			m["check_run"].(map[string]any)["id"] = runID(first.EntryID) + 1
		},
		"another-installation": func(m map[string]any) {
			rerun(first.EntryID, app)(m)
			m["installation"].(map[string]any)["id"] = 99
		},
		"an-rpc-item": rerun(rpcEntry.EntryID, app),
		"own-bot": func(m map[string]any) {
			rerun(first.EntryID, app)(m)
			m["sender"].(map[string]any)["login"] = "gitlease[bot]"
			m["sender"].(map[string]any)["type"] = "Bot"
		},
	} {
		r := deliver(t, intake, "check_run", "d-"+name, "check_run-rerequested.json", fn)
		if r.Outcome != webhook.OutcomeIgnored {
			t.Errorf("Re-run of %s: %+v, want ignored", name, r)
		}
		want := map[string]string{"another-check-run": "is not the one gitlease recorded", "another-installation": "another installation",
			"an-rpc-item": "not enqueued from a GitHub delivery", "own-bot": "sent by gitlease itself"}[name]
		if !strings.Contains(r.Reason, want) {
			t.Errorf("Re-run of %s: reason %q, want it to say %q", name, r.Reason, want)
		}
	}
	finish()
	runs := checkRunsOf(h.gh, second.EntryID)
	if len(runs) != 1 || runs[0].HeadSHA != head || runs[0].Conclusion != "success" {
		t.Fatalf("generation 2's check runs: %+v, want one on %s concluded success", runs, head)
	}

	suite := func(m map[string]any) {
		cs := m["check_suite"].(map[string]any)
		cs["head_sha"] = head
		cs["app"].(map[string]any)["id"] = app
		cs["pull_requests"].([]any)[0].(map[string]any)["head"].(map[string]any)["sha"] = head
	}
	third := deliver(t, intake, "check_suite", "d-4", "check_suite-rerequested.json", suite)
	if third.Outcome != webhook.OutcomeEnqueued || third.Generation == nil || *third.Generation != 3 {
		t.Fatalf("Re-run of the check suite: %+v, want generation 3", third)
	}
	finish()
	if runs := checkRunsOf(h.gh, third.EntryID); len(runs) != 1 || runs[0].HeadSHA != head {
		t.Fatalf("generation 3's check runs: %+v", runs)
	}
	if n := len(h.gh.CheckRuns(helloWorld)); n != 3 {
		t.Errorf("%d check runs in all, want one per generation (3)", n)
	}
}

// TestRerunOfAnIssueItemReusesItsBranch: the new generation of an issue
// item gets its own check run on the same branch head, through the same
// pull request.
func TestRerunOfAnIssueItemReusesItsBranch(t *testing.T) {
	t.Parallel()
	h, intake := newIntakeHarness(t)
	first := deliver(t, intake, "issues", "d-1", "issues-opened.json", nil)
	fe := h.leaseAll(t, "w1")[0]
	h.drain(t, h.sender(t))
	h.complete(t, fe, queue.StatusCompleted)
	h.drain(t, h.sender(t))
	runs := checkRunsOf(h.gh, first.EntryID)
	if len(runs) != 1 {
		t.Fatalf("generation 1 check runs: %+v", runs)
	}
	second := deliver(t, intake, "check_run", "d-2", "check_run-rerequested.json", func(m map[string]any) {
		cr := m["check_run"].(map[string]any)
		cr["external_id"], cr["head_sha"], cr["pull_requests"] = first.EntryID, runs[0].HeadSHA, []any{}
		cr["id"] = float64(runs[0].ID)
	})
	if second.Outcome != webhook.OutcomeEnqueued {
		t.Fatalf("Re-run of the issue item: %+v", second)
	}
	fe = h.leaseAll(t, "w1")[0]
	h.drain(t, h.sender(t))
	h.complete(t, fe, queue.StatusCompleted)
	h.drain(t, h.sender(t))
	again := checkRunsOf(h.gh, second.EntryID)
	if len(again) != 1 || again[0].HeadSHA != runs[0].HeadSHA || again[0].Conclusion != "success" {
		t.Fatalf("generation 2 check runs: %+v, want one on %s", again, runs[0].HeadSHA)
	}
	if b, p := len(h.gh.Branches(helloWorld)), len(h.gh.PullRequests(helloWorld)); b != 2 || p != 1 {
		t.Fatalf("%d branches and %d pull requests, want main + one branch and one pull request", b, p)
	}
}

// TestInstallationGoneCancelsItsWork: deleting the installation cancels
// its pending items, asks its assigned ones to stop, and stops its outbox
// rows with the reason; removing a repository does the same for that
// repository only; unsuspend changes nothing.
func TestInstallationGoneCancelsItsWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		event, fixture string
		reason         string
	}{
		{"installation", "installation-deleted.json", "was deleted"},
		{"installation", "installation-suspend.json", "was suspended"},
		{"installation_repositories", "installation_repositories-removed.json", "were removed"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			h, intake := newIntakeHarness(t)
			ctx := context.Background()
			assigned := deliver(t, intake, "issues", "d-1", "issues-opened.json", nil)
			h.leaseAll(t, "w1") // assigned; its provisioning and check-run rows wait in the outbox
			pending := deliver(t, intake, "pull_request", "d-2", "pull_request-opened.json", nil)
			if assigned.Outcome != webhook.OutcomeEnqueued || pending.Outcome != webhook.OutcomeEnqueued {
				t.Fatalf("deliveries: %+v %+v", assigned, pending)
			}
			r := deliver(t, intake, tc.event, "d-3", tc.fixture, nil)
			if r.Outcome != webhook.OutcomeCancelled || !strings.Contains(r.Reason, "1 pending or held item(s) cancelled, 1 assigned item(s) asked to stop") {
				t.Fatalf("%s: %+v", tc.fixture, r)
			}
			if it, _ := h.store.Get(ctx, pending.EntryID); it.Status() != queue.StatusCancelled {
				t.Errorf("pending item is %s, want cancelled", it.Status())
			}
			var stopped, left int
			var why string
			if err := h.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'failed'), count(*) FILTER (WHERE status = 'pending'), coalesce(max(last_error), '') FROM outbox`).Scan(&stopped, &left, &why); err != nil {
				t.Fatal(err)
			}
			if stopped == 0 || left != 0 || !strings.Contains(why, tc.reason) {
				t.Errorf("outbox: %d rows stopped (%q), %d left pending; want all stopped with the reason", stopped, why, left)
			}
			if n := len(h.gh.Requests()); n != 0 {
				t.Errorf("%d GitHub calls for a gone installation", n)
			}
			if r := deliver(t, intake, tc.event, "d-3", tc.fixture, nil); r.Outcome != webhook.OutcomeReplay {
				t.Errorf("redelivery: %+v", r)
			}
		})
	}
	t.Run("unsuspend", func(t *testing.T) {
		t.Parallel()
		_, intake := newIntakeHarness(t)
		if r := deliver(t, intake, "installation", "d-1", "installation-unsuspend.json", nil); r.Outcome != webhook.OutcomeIgnored {
			t.Fatalf("unsuspend: %+v", r)
		}
	})
}

// TestCancelButton: a pull request item's queued check run offers the
// Cancel button; pressing it (check_run requested_action) cancels the item
// only for this App's check run recorded for a live entry of the same
// installation and repository, with the button's identifier; the
// conclusion says who and how and removes the button.
func TestCancelButton(t *testing.T) {
	t.Parallel()
	h, intake := newIntakeHarness(t)
	head := h.gh.Push(helloWorld, "fix-greeting", "a greeting fix")
	first := deliver(t, intake, "pull_request", "d-1", "pull_request-opened.json", func(m map[string]any) {
		m["pull_request"].(map[string]any)["head"].(map[string]any)["sha"] = head
	})
	if first.Outcome != webhook.OutcomeEnqueued {
		t.Fatalf("pull request opened: %+v", first)
	}
	h.drain(t, h.sender(t))
	runs := checkRunsOf(h.gh, first.EntryID)
	if len(runs) != 1 || runs[0].Status != "queued" || len(runs[0].Actions) != 1 || runs[0].Actions[0].Identifier != "cancel" {
		t.Fatalf("queued check run %+v, want one offering the Cancel button", runs)
	}
	if !strings.HasPrefix(runs[0].Summary, "**Queued") || !strings.Contains(runs[0].Summary, first.EntryID) {
		t.Errorf("queued summary %q", runs[0].Summary)
	}
	press := func(mod func(cr, m map[string]any)) func(m map[string]any) {
		return func(m map[string]any) {
			m["action"] = "requested_action"
			m["requested_action"] = map[string]any{"identifier": "cancel"}
			cr := m["check_run"].(map[string]any)
			cr["id"], cr["external_id"], cr["head_sha"] = float64(runs[0].ID), first.EntryID, head
			cr["app"].(map[string]any)["id"] = float64(h.gh.AppID)
			if mod != nil {
				mod(cr, m)
			}
		}
	}
	for name, mod := range map[string]func(cr, m map[string]any){
		"another-app":          func(cr, _ map[string]any) { cr["app"].(map[string]any)["id"] = float64(h.gh.AppID + 1) },
		"another-button":       func(_, m map[string]any) { m["requested_action"] = map[string]any{"identifier": "rerun"} },
		"another-check-run":    func(cr, _ map[string]any) { cr["id"] = float64(runs[0].ID + 1) },
		"another-installation": func(_, m map[string]any) { m["installation"].(map[string]any)["id"] = float64(999) },
		"another-repository":   func(_, m map[string]any) { m["repository"].(map[string]any)["id"] = float64(4242) },
		"unknown-entry":        func(cr, _ map[string]any) { cr["external_id"] = "8f1c2d6e-0000-4000-8000-000000000000" },
	} {
		if r := deliver(t, intake, "check_run", "d-"+name, "check_run-rerequested.json", press(mod)); r.Outcome != webhook.OutcomeIgnored {
			t.Errorf("press on %s: %+v, want ignored", name, r)
		}
	}
	if it, _ := h.store.Get(context.Background(), first.EntryID); it.Status() != queue.StatusPending {
		t.Fatalf("after the ignored presses the item is %s", it.Status())
	}
	if r := deliver(t, intake, "check_run", "d-press", "check_run-rerequested.json", press(nil)); r.Outcome != webhook.OutcomeCancelled || r.EntryID != first.EntryID {
		t.Fatalf("press: %+v, want cancelled naming %s", r, first.EntryID)
	}
	if r := deliver(t, intake, "check_run", "d-again", "check_run-rerequested.json", press(nil)); r.Outcome != webhook.OutcomeIgnored {
		t.Errorf("a second press: %+v, want ignored (nothing live)", r)
	}
	h.drain(t, h.sender(t))
	runs = checkRunsOf(h.gh, first.EntryID)
	if len(runs) != 1 || runs[0].Conclusion != "cancelled" || len(runs[0].Actions) != 0 ||
		!strings.HasPrefix(runs[0].Summary, "**Cancelled by @octocat with the Cancel button**") {
		t.Fatalf("concluded check run %+v", runs)
	}
}
