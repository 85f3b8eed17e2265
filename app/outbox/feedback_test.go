package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
	"github.com/gitlease/gitlease/webhook/webhooktest"
)

const secret = "feedback-secret"

func deliver(t *testing.T, h http.Handler, event, id, fixture string, fn func(m map[string]any)) webhook.Response {
	t.Helper()
	return webhooktest.Deliver(t, h, secret, event, id, fixture, fn)
}

// TestDeliveryFeedbackOnGitHub: replays and collisions show up on GitHub as
// annotations and check runs that say what happened.
func TestDeliveryFeedbackOnGitHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gh := githubtest.New(t, githubtest.ForbidRefUpdates())
	gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	gh.AddInstallation(2311213, "octocat/Hello-World")
	gh.ReserveNumbers("octocat/Hello-World", 2000)
	h := &harness{gh: gh, pool: dbtest.New(t), outbox: outbox.NewOutbox(nil, nil)}
	h.store = queue.NewStore(h.pool, queue.Config{Observer: h.outbox, Views: outbox.NewItems(h.pool)})
	verifier, _ := webhook.NewVerifier(secret)
	mapper, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/", BotLogin: "gitlease[bot]"})
	if err != nil {
		t.Fatal(err)
	}
	intake := webhook.NewHandler(h.store, verifier, mapper, nil, webhook.HandlerConfig{OnOutcome: h.outbox.DeliveryFeedback})

	first := deliver(t, intake, "issues", "d-1", "issues-opened.json", nil)
	if first.Outcome != webhook.OutcomeEnqueued {
		t.Fatalf("first delivery: %+v", first)
	}
	h.leaseAll(t, "w1")
	h.drain(t, h.sender(t))

	if r := deliver(t, intake, "issues", "d-1", "issues-opened.json", nil); r.Outcome != webhook.OutcomeReplay {
		t.Fatalf("redelivery: %+v", r)
	}
	if r := deliver(t, intake, "issues", "d-2", "issues-reopened.json", nil); r.Outcome != webhook.OutcomeSubjectCollision {
		t.Fatalf("second delivery for the live issue: %+v", r)
	}
	// A person opens a pull request from the branch gitlease reserved, with a commit of their own.
	humanSHA := gh.Push("octocat/Hello-World", "gitlease/issue-1347", "my own fix")
	r := deliver(t, intake, "pull_request", "d-3", "pull_request-opened.json", func(m map[string]any) {
		pr := m["pull_request"].(map[string]any)
		head := pr["head"].(map[string]any)
		head["ref"], head["sha"] = "gitlease/issue-1347", humanSHA
	})
	if r.Outcome != webhook.OutcomeReservationCollision || r.EntryID != first.EntryID {
		t.Fatalf("pull request from the reserved branch: %+v, want a reservation collision naming %s", r, first.EntryID)
	}
	h.drain(t, h.sender(t))

	v, _ := h.store.View(ctx, first.EntryID)
	run, ok := gh.CheckRun(v.CheckRunID)
	if !ok {
		t.Fatal("the item has no check run")
	}
	levels := map[string]string{}
	for _, a := range run.Annotations {
		levels[a.Title] = a.Level
		if a.Path != ".github" || a.StartLine != 1 || !json.Valid([]byte(a.RawDetails)) {
			t.Errorf("annotation %+v: want path .github, line 1, JSON raw_details", a)
		}
	}
	want := map[string]string{"Delivery replayed": "notice", "Subject already has live work": "warning", "Branch reserved by this work": "warning"}
	for title, level := range want {
		if levels[title] != level {
			t.Errorf("annotation %q is %q, want %q (have %v)", title, levels[title], level, levels)
		}
	}
	var blocked []githubtest.CheckRun
	for _, cr := range gh.CheckRuns("octocat/Hello-World") {
		if cr.HeadSHA == humanSHA {
			blocked = append(blocked, cr)
		}
	}
	if len(blocked) != 1 || blocked[0].Conclusion != "action_required" ||
		!strings.Contains(blocked[0].Summary, "github_issue:1296269#1347") || !strings.Contains(blocked[0].Summary, first.EntryID) ||
		!strings.Contains(blocked[0].Summary, "refs/heads/gitlease/issue-1347") || !strings.Contains(blocked[0].Summary, "/pull/") {
		t.Fatalf("check runs on the human pull request's head: %+v, want one action_required naming the holder and its pull request", blocked)
	}
}
