package webhook_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// wantItem is what an enqueued item must look like.
type wantItem struct {
	kind, qualifiedID string
	title             string
	labels            []string
	reservation       queue.Reservation
	headSHA           string
	headInFork        bool
	number            int
	sender            string
	triggerSource     string
	htmlURL           string
}

const (
	issueQID = "github_issue:1296269#1347"
	prQID    = "github_pull_request:1296269#1348"
	forkQID  = "github_pull_request:1296269#1349"
	headSHA  = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
	syncSHA  = "e5bd3914e2e596debea16f433f57875b5b90bcd6"
)

var (
	issueReservation = queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: "refs/heads/gitlease/issue-1347"}
	prReservation    = queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: "refs/heads/fix-greeting"}
)

func issueItem(action string, labels ...string) *wantItem {
	return &wantItem{
		kind: webhook.KindIssue, qualifiedID: issueQID, title: "Fix the greeting typo in README",
		labels: labels, reservation: issueReservation, number: 1347, sender: "octocat",
		triggerSource: "github:issues." + action, htmlURL: "https://github.com/octocat/Hello-World/issues/1347",
	}
}

func prItem(action, sha string, labels ...string) *wantItem {
	return &wantItem{
		kind: webhook.KindPullRequest, qualifiedID: prQID, title: "Fix the greeting typo",
		labels: labels, reservation: prReservation, headSHA: sha, number: 1348, sender: "octocat",
		triggerSource: "github:pull_request." + action, htmlURL: "https://github.com/octocat/Hello-World/pull/1348",
	}
}

// TestHandlerEvents sends each event and action of docs/webhook.md through the real
// handler on its own database and checks the answer, the delivery row and
// the item.
func TestHandlerEvents(t *testing.T) {
	t.Parallel()
	withTrigger := func(o *options) { o.mapper.TriggerLabel = "gitlease" }
	withPRs := func(o *options) { o.prs = newFakePRs(t) }
	anyAuthor := func(o *options) { o.mapper.AllowedAuthors, _ = webhook.ParseAllowedAuthors("any") }
	collaborator := func(m map[string]any) { obj(m, "pull_request")["author_association"] = "COLLABORATOR" }
	setAction := func(action string) func(m map[string]any) { return func(m map[string]any) { m["action"] = action } }

	tests := []struct {
		name    string
		fixture string
		edit    func(m map[string]any)
		opts    func(o *options)
		form    bool

		status     int
		outcome    webhook.Outcome
		reason     string // substring of the answer's reason
		item       *wantItem
		action     string // stored action; the fixture's when ""
		sender     string // stored sender; octocat when ""
		noRepoFact bool   // the payload has no repository (ping)
	}{
		{name: "issue opened", fixture: "issues-opened", status: 202, outcome: webhook.OutcomeEnqueued,
			item: issueItem("opened", "bug")},
		{name: "issue opened form-encoded", fixture: "issues-opened", form: true, status: 202, outcome: webhook.OutcomeEnqueued,
			item: issueItem("opened", "bug")},
		{name: "issue reopened", fixture: "issues-reopened", status: 202, outcome: webhook.OutcomeEnqueued,
			item: issueItem("reopened", "bug", "gitlease")},
		{name: "issue labeled, no trigger label", fixture: "issues-labeled", status: 200, outcome: webhook.OutcomeIgnored,
			reason: "no trigger label is configured"},
		{name: "issue labeled with the trigger label", fixture: "issues-labeled", opts: withTrigger, status: 202,
			outcome: webhook.OutcomeEnqueued, item: issueItem("labeled", "bug", "gitlease")},
		{name: "issue labeled with another label", fixture: "issues-labeled", opts: func(o *options) { o.mapper.TriggerLabel = "agent" },
			status: 200, outcome: webhook.OutcomeIgnored, reason: `added label "gitlease" is not the trigger label "agent"`},
		{name: "issue opened without the trigger label", fixture: "issues-opened", opts: withTrigger, status: 200,
			outcome: webhook.OutcomeIgnored, reason: `issue does not carry the trigger label "gitlease"`},
		{name: "issue reopened with the trigger label", fixture: "issues-reopened", opts: withTrigger, status: 202,
			outcome: webhook.OutcomeEnqueued, item: issueItem("reopened", "bug", "gitlease")},
		{name: "issue closed with nothing live", fixture: "issues-closed", status: 200, outcome: webhook.OutcomeIgnored,
			reason: "nothing live to cancel for " + issueQID},
		{name: "issue edited", fixture: "issues-opened", edit: setAction("edited"), action: "edited", status: 200,
			outcome: webhook.OutcomeIgnored, reason: `issues action "edited" is not handled`},

		{name: "pull request opened", fixture: "pull_request-opened", status: 202, outcome: webhook.OutcomeEnqueued,
			item: prItem("opened", headSHA)},
		{name: "pull request from a fork by a contributor", fixture: "pull_request-opened-fork", sender: "hubot", status: 200,
			outcome: webhook.OutcomeIgnored, reason: "pull request author association CONTRIBUTOR is not in GITLEASE_ALLOWED_AUTHORS=OWNER,MEMBER,COLLABORATOR"},
		{name: "issue by a stranger", fixture: "issues-opened", edit: func(m map[string]any) { obj(m, "issue")["author_association"] = "NONE" },
			status: 200, outcome: webhook.OutcomeIgnored, reason: "issue author association NONE is not in GITLEASE_ALLOWED_AUTHORS=OWNER,MEMBER,COLLABORATOR"},
		{name: "issue by a stranger, anyone allowed", fixture: "issues-opened", opts: anyAuthor,
			edit:   func(m map[string]any) { obj(m, "issue")["author_association"] = "NONE" },
			status: 202, outcome: webhook.OutcomeEnqueued, item: issueItem("opened", "bug")},
		{name: "issue without an association", fixture: "issues-opened", edit: func(m map[string]any) { delete(obj(m, "issue"), "author_association") },
			status: 200, outcome: webhook.OutcomeIgnored, reason: "issue author association (none) is not in GITLEASE_ALLOWED_AUTHORS"},
		{name: "pull request from a fork by anyone allowed", fixture: "pull_request-opened-fork", opts: anyAuthor, status: 202,
			outcome: webhook.OutcomeEnqueued, sender: "hubot", item: &wantItem{
				kind: webhook.KindPullRequest, qualifiedID: forkQID, title: "Translate the greeting to Spanish",
				reservation: queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: "refs/pull/1349/head"},
				headSHA:     "3c5d8b0f7e1a4c2d9b6e8f0a1c3e5d7b9f2a4c6e", headInFork: true, number: 1349, sender: "hubot",
				triggerSource: "github:pull_request.opened", htmlURL: "https://github.com/octocat/Hello-World/pull/1349",
			}},
		{name: "pull request opened from a fork", fixture: "pull_request-opened-fork", edit: collaborator, status: 202, outcome: webhook.OutcomeEnqueued,
			sender: "hubot", item: &wantItem{
				kind: webhook.KindPullRequest, qualifiedID: forkQID, title: "Translate the greeting to Spanish",
				reservation: queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: "refs/pull/1349/head"},
				headSHA:     "3c5d8b0f7e1a4c2d9b6e8f0a1c3e5d7b9f2a4c6e", headInFork: true, number: 1349, sender: "hubot",
				triggerSource: "github:pull_request.opened", htmlURL: "https://github.com/octocat/Hello-World/pull/1349",
			}},
		{name: "pull request from a deleted fork", fixture: "pull_request-opened-fork", sender: "hubot",
			edit: func(m map[string]any) {
				collaborator(m)
				obj(obj(m, "pull_request"), "head")["repo"] = nil
			},
			status: 202, outcome: webhook.OutcomeEnqueued, item: &wantItem{
				kind: webhook.KindPullRequest, qualifiedID: forkQID, title: "Translate the greeting to Spanish",
				reservation: queue.Reservation{Repository: repoName, BaseRef: "refs/heads/main", HeadRef: "refs/pull/1349/head"},
				headSHA:     "3c5d8b0f7e1a4c2d9b6e8f0a1c3e5d7b9f2a4c6e", headInFork: true, number: 1349, sender: "hubot",
				triggerSource: "github:pull_request.opened", htmlURL: "https://github.com/octocat/Hello-World/pull/1349",
			}},
		{name: "pull request synchronize", fixture: "pull_request-synchronize", status: 202, outcome: webhook.OutcomeEnqueued,
			item: prItem("synchronize", syncSHA)},
		{name: "pull request reopened", fixture: "pull_request-opened", edit: setAction("reopened"), action: "reopened",
			status: 202, outcome: webhook.OutcomeEnqueued, item: prItem("reopened", headSHA)},
		{name: "pull request ready for review", fixture: "pull_request-opened", edit: setAction("ready_for_review"),
			action: "ready_for_review", status: 202, outcome: webhook.OutcomeEnqueued, item: prItem("ready_for_review", headSHA)},
		{name: "pull request labeled, no trigger label", fixture: "pull_request-labeled", status: 200, outcome: webhook.OutcomeIgnored,
			reason: "no trigger label is configured"},
		{name: "pull request labeled with the trigger label", fixture: "pull_request-labeled", opts: withTrigger, status: 202,
			outcome: webhook.OutcomeEnqueued, item: prItem("labeled", headSHA, "gitlease")},
		{name: "pull request opened without the trigger label", fixture: "pull_request-opened", opts: withTrigger, status: 200,
			outcome: webhook.OutcomeIgnored, reason: `pull request does not carry the trigger label "gitlease"`},
		{name: "pull request closed with nothing live", fixture: "pull_request-closed", status: 200, outcome: webhook.OutcomeIgnored,
			reason: "nothing live to cancel for " + prQID},
		{name: "pull request converted to draft", fixture: "pull_request-opened", edit: setAction("converted_to_draft"),
			action: "converted_to_draft", status: 200, outcome: webhook.OutcomeIgnored, reason: "not handled"},
		{name: "pull request opened by gitlease's bot", fixture: "pull_request-opened-bot", sender: botLogin, status: 200,
			outcome: webhook.OutcomeIgnored, reason: "sent by gitlease itself"},

		{name: "comment command from the owner", fixture: "issue_comment-created", status: 202, outcome: webhook.OutcomeEnqueued,
			item: func() *wantItem {
				w := issueItem("opened", "bug")
				w.triggerSource = "github:issue_comment.created"
				return w
			}()},
		{name: "comment command works with a trigger label", fixture: "issue_comment-created", opts: withTrigger, status: 202,
			outcome: webhook.OutcomeEnqueued, item: func() *wantItem {
				w := issueItem("opened", "bug")
				w.triggerSource = "github:issue_comment.created"
				return w
			}()},
		{name: "comment command from a collaborator", fixture: "issue_comment-created",
			edit:   func(m map[string]any) { obj(m, "comment")["author_association"] = "COLLABORATOR" },
			status: 202, outcome: webhook.OutcomeEnqueued, item: func() *wantItem {
				w := issueItem("opened", "bug")
				w.triggerSource = "github:issue_comment.created"
				return w
			}()},
		{name: "comment command from someone without write access", fixture: "issue_comment-created-none", sender: "mona-stranger",
			status: 200, outcome: webhook.OutcomeIgnored, reason: "comment author association NONE is not in GITLEASE_ALLOWED_AUTHORS=OWNER,MEMBER,COLLABORATOR"},
		{name: "comment command from a stranger, allowed by the setting", fixture: "issue_comment-created-none", sender: "mona-stranger",
			opts:   func(o *options) { o.mapper.AllowedAuthors, _ = webhook.ParseAllowedAuthors("contributor, NONE") },
			status: 202, outcome: webhook.OutcomeEnqueued, item: func() *wantItem {
				w := issueItem("opened", "bug")
				w.triggerSource, w.sender = "github:issue_comment.created", "mona-stranger"
				return w
			}()},
		{name: "a collaborator's command on a stranger's issue", fixture: "issue_comment-created",
			edit: func(m map[string]any) {
				obj(m, "issue")["author_association"] = "NONE"
				obj(m, "comment")["author_association"] = "COLLABORATOR"
			},
			status: 202, outcome: webhook.OutcomeEnqueued, item: func() *wantItem {
				w := issueItem("opened", "bug")
				w.triggerSource = "github:issue_comment.created"
				return w
			}()},
		{name: "comment that is no command", fixture: "issue_comment-created",
			edit:   func(m map[string]any) { obj(m, "comment")["body"] = "/gitlease running late, sorry" },
			status: 200, outcome: webhook.OutcomeIgnored, reason: "is not a /gitlease run or /gitlease cancel command"},
		{name: "cancel command with nothing live", fixture: "issue_comment-created",
			edit:   func(m map[string]any) { obj(m, "comment")["body"] = "/gitlease cancel\nplease" },
			status: 200, outcome: webhook.OutcomeIgnored, reason: "nothing live to cancel for " + issueQID},
		{name: "cancel command on a pull request with nothing live", fixture: "issue_comment-created-pr",
			edit:   func(m map[string]any) { obj(m, "comment")["body"] = "/gitlease cancel" },
			status: 200, outcome: webhook.OutcomeIgnored, reason: "nothing live to cancel for github_pull_request:"},
		{name: "cancel command from someone without write access", fixture: "issue_comment-created-none", sender: "mona-stranger",
			edit:   func(m map[string]any) { obj(m, "comment")["body"] = "/gitlease cancel" },
			status: 200, outcome: webhook.OutcomeIgnored, reason: "comment author association NONE is not in GITLEASE_ALLOWED_AUTHORS=OWNER,MEMBER,COLLABORATOR"},
		{name: "comment edited", fixture: "issue_comment-created", edit: setAction("edited"), action: "edited",
			status: 200, outcome: webhook.OutcomeIgnored, reason: `issue_comment action "edited" is not handled`},
		{name: "comment command on a pull request", fixture: "issue_comment-created-pr", opts: withPRs, status: 202,
			outcome: webhook.OutcomeEnqueued, item: func() *wantItem {
				w := prItem("opened", headSHA)
				w.triggerSource = "github:issue_comment.created"
				return w
			}()},
		{name: "comment command on a pull request without credentials", fixture: "issue_comment-created-pr", status: 200,
			outcome: webhook.OutcomeIgnored, reason: webhook.ReasonNoPullRequestGetter},

		{name: "ping", fixture: "ping", status: 200, outcome: webhook.OutcomeIgnored, reason: "ping", noRepoFact: true, sender: "-"},
		{name: "an event gitlease ignores", fixture: "star-created", sender: "hubot", status: 200, outcome: webhook.OutcomeIgnored,
			reason: `event "star" is not handled`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := defaultOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			e := newEnv(t, opts)
			body := payload(t, tc.fixture)
			if tc.edit != nil {
				body = edit(t, tc.fixture, tc.edit)
			}
			id := uuid.NewString()
			status, resp := e.post(t, request{event: eventOf(tc.fixture), delivery: id, body: body, form: tc.form})
			if status != tc.status || resp.Outcome != tc.outcome {
				t.Fatalf("answer %d %+v, want %d %s", status, resp, tc.status, tc.outcome)
			}
			if resp.DeliveryID != id || resp.Error != "" {
				t.Errorf("answer %+v: want delivery_id %s and no error", resp, id)
			}
			if !strings.Contains(resp.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", resp.Reason, tc.reason)
			}

			// The delivery row.
			d := e.delivery(t, id)
			wantAction := tc.action
			if wantAction == "" && tc.fixture != "ping" {
				wantAction = strings.SplitN(tc.fixture, "-", 3)[1]
			}
			wantSender := tc.sender
			switch wantSender {
			case "":
				wantSender = "octocat"
			case "-":
				wantSender = ""
			}
			if d.Event != eventOf(tc.fixture) || dbq.Deref(d.Action) != wantAction || dbq.Deref(d.Sender) != wantSender ||
				d.SecretIndex != 0 || d.Attempts != 1 || d.Outcome != string(tc.outcome) || dbq.Deref(d.Reason) != resp.Reason {
				t.Errorf("delivery row event=%s action=%s sender=%s secret=%d attempts=%d outcome=%s reason=%q; want %s %s %s 0 1 %s %q",
					d.Event, dbq.Deref(d.Action), dbq.Deref(d.Sender), d.SecretIndex, d.Attempts, d.Outcome, dbq.Deref(d.Reason),
					eventOf(tc.fixture), wantAction, wantSender, tc.outcome, resp.Reason)
			}
			if tc.noRepoFact {
				if d.RepositoryID != nil || d.Repository != nil || d.InstallationID != nil {
					t.Errorf("ping row has repository %v/%v installation %v", d.RepositoryID, d.Repository, d.InstallationID)
				}
			} else if dbq.Deref(d.RepositoryID) != repoID || dbq.Deref(d.Repository) != repoName || dbq.Deref(d.InstallationID) != installID {
				t.Errorf("delivery row repository %d %s installation %d", dbq.Deref(d.RepositoryID), dbq.Deref(d.Repository), dbq.Deref(d.InstallationID))
			}
			if len(d.BodySha256) != 64 || d.ReceivedAt.IsZero() || !d.ReceivedAt.Equal(d.LastReceivedAt) {
				t.Errorf("delivery row hash %q received %v last %v", d.BodySha256, d.ReceivedAt, d.LastReceivedAt)
			}

			if tc.item == nil {
				if resp.EntryID != "" || d.EntryID != nil || e.count(t, "work_items") != 0 {
					t.Errorf("no item expected: answer entry %q, row entry %v, %d items", resp.EntryID, d.EntryID, e.count(t, "work_items"))
				}
				return
			}
			checkItem(t, e, resp, id, *tc.item)
			if d.EntryID == nil || d.EntryID.String() != resp.EntryID || dbq.Deref(d.QualifiedID) != tc.item.qualifiedID || dbq.Deref(d.Generation) != 1 {
				t.Errorf("delivery row entry %v %v %v, want %s %s 1", d.EntryID, dbq.Deref(d.QualifiedID), dbq.Deref(d.Generation), resp.EntryID, tc.item.qualifiedID)
			}
		})
	}
}

// checkItem checks the item the answer names against want.
func checkItem(t *testing.T, e *testEnv, resp webhook.Response, deliveryID string, want wantItem) {
	t.Helper()
	if resp.QualifiedID != want.qualifiedID || resp.Generation == nil || *resp.Generation != 1 {
		t.Fatalf("answer names %s generation %v, want %s 1", resp.QualifiedID, resp.Generation, want.qualifiedID)
	}
	it := e.item(t, resp.EntryID)
	if it.Status() != queue.StatusPending || it.QualifiedID() != want.qualifiedID || it.Generation() != 1 ||
		it.IdempotencyKey() != deliveryID {
		t.Errorf("item %s %s gen %d key %q", it.Status(), it.QualifiedID(), it.Generation(), it.IdempotencyKey())
	}
	if r := it.Reservation(); r == nil || *r != want.reservation {
		t.Errorf("reservation %+v, want %+v", r, want.reservation)
	}
	d, m := dispatchOf(t, it)
	s := d.Subject
	if s.Kind != want.kind || want.kind+":"+s.ID != want.qualifiedID || s.Title != want.title ||
		!slices.Equal(s.Labels, want.labels) || s.Description == "" {
		t.Errorf("subject %s %s %q labels %v description %q", s.Kind, s.ID, s.Title, s.Labels, s.Description)
	}
	if d.WorkflowRef != webhook.WorkflowCoding || d.TriggerSource != want.triggerSource || d.RequestedAt.IsZero() {
		t.Errorf("dispatch workflow %q trigger %q requested %v", d.WorkflowRef, d.TriggerSource, d.RequestedAt)
	}
	wantMeta := webhook.Metadata{
		InstallationID: installID, RepositoryID: repoID, Repository: repoName, Number: want.number,
		HTMLURL: want.htmlURL, HeadSHA: want.headSHA, HeadInFork: want.headInFork, Event: m.Event, Action: m.Action,
		DeliveryID: deliveryID, Sender: want.sender, CommentID: m.CommentID,
	}
	if m != wantMeta {
		t.Errorf("metadata %+v\nwant     %+v", m, wantMeta)
	}
	if src := "github:" + m.Event + "." + m.Action; src != want.triggerSource {
		t.Errorf("metadata event/action %s, want %s", src, want.triggerSource)
	}
	if (m.Event == "issue_comment") != (m.CommentID != 0) {
		t.Errorf("metadata comment_id %d for event %s", m.CommentID, m.Event)
	}
}

// TestCollisions: a second event for a live subject, and a second subject
// on a live head ref, name the live holder and store nothing new.
func TestCollisions(t *testing.T) {
	t.Parallel()
	t.Run("subject", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, defaultOptions())
		_, first := e.post(t, request{event: "issues", delivery: "d-opened", body: payload(t, "issues-opened")})
		status, resp := e.post(t, request{event: "issues", delivery: "d-reopened", body: payload(t, "issues-reopened")})
		if status != 200 || resp.Outcome != webhook.OutcomeSubjectCollision || resp.EntryID != first.EntryID ||
			resp.QualifiedID != issueQID || resp.Generation == nil || *resp.Generation != 1 {
			t.Fatalf("answer %d %+v, want subject_collision naming %s", status, resp, first.EntryID)
		}
		d := e.delivery(t, "d-reopened")
		if d.Outcome != "subject_collision" || d.EntryID.String() != first.EntryID || dbq.Deref(d.Generation) != 1 {
			t.Errorf("row %s %v %v", d.Outcome, d.EntryID, d.Generation)
		}
		if n := e.count(t, "work_items"); n != 1 {
			t.Errorf("%d items, want 1", n)
		}
		// The synchronize of a pull request whose item is live collides too.
		e.post(t, request{event: "pull_request", delivery: "d-pr", body: payload(t, "pull_request-opened")})
		_, resp = e.post(t, request{event: "pull_request", delivery: "d-sync", body: payload(t, "pull_request-synchronize")})
		if resp.Outcome != webhook.OutcomeSubjectCollision || resp.QualifiedID != prQID {
			t.Errorf("synchronize answer %+v", resp)
		}
	})
	t.Run("reservation", func(t *testing.T) {
		t.Parallel()
		// Without a bot login, gitlease's own pull request for issue 1347
		// (head gitlease/issue-1347) would collide with the issue's item:
		// the reason the App's own events are ignored.
		opts := defaultOptions()
		opts.mapper.BotLogin = ""
		opts.mapper.AllowedAuthors, _ = webhook.ParseAllowedAuthors("any") // a bot's association is NONE
		e := newEnv(t, opts)
		_, first := e.post(t, request{event: "issues", delivery: "d-issue", body: payload(t, "issues-opened")})
		status, resp := e.post(t, request{event: "pull_request", delivery: "d-bot-pr", body: payload(t, "pull_request-opened-bot")})
		if status != 200 || resp.Outcome != webhook.OutcomeReservationCollision || resp.EntryID != first.EntryID ||
			resp.QualifiedID != issueQID || resp.Generation == nil || *resp.Generation != 1 {
			t.Fatalf("answer %d %+v, want reservation_collision naming %s", status, resp, first.EntryID)
		}
		if !strings.Contains(resp.Reason, "refs/heads/gitlease/issue-1347") {
			t.Errorf("reason %q does not name the head ref", resp.Reason)
		}
		if d := e.delivery(t, "d-bot-pr"); d.Outcome != "reservation_collision" || d.EntryID.String() != first.EntryID {
			t.Errorf("row %s %v", d.Outcome, d.EntryID)
		}
		if n := e.count(t, "work_items"); n != 1 {
			t.Errorf("%d items, want 1", n)
		}
	})
}

// TestCloseCancels: a close event cancels the subject's pending and held
// items and asks an assigned one to stop; after it, the subject enqueues
// its next generation.
func TestCloseCancels(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		open, close  string
		prepare      func(t *testing.T, e *testEnv, entryID string)
		wantStatus   string
		wantReason   string
		reopen       string
		reopenAction string
	}{
		{name: "pending issue", open: "issues-opened", close: "issues-closed", wantStatus: queue.StatusCancelled,
			wantReason: "1 pending or held", reopen: "issues-reopened"},
		{name: "held issue", open: "issues-opened", close: "issues-closed", wantStatus: queue.StatusCancelled,
			wantReason: "1 pending or held", reopen: "issues-reopened",
			prepare: func(t *testing.T, e *testEnv, entryID string) {
				if ch, err := e.store.Hold(context.Background(), entryID); err != nil || !ch.Changed {
					t.Fatalf("hold: %+v %v", ch, err)
				}
			}},
		{name: "pending pull request", open: "pull_request-opened", close: "pull_request-closed", wantStatus: queue.StatusCancelled,
			wantReason: "1 pending or held"},
		{name: "held pull request", open: "pull_request-opened", close: "pull_request-closed", wantStatus: queue.StatusCancelled,
			wantReason: "1 pending or held", prepare: func(t *testing.T, e *testEnv, entryID string) {
				if _, err := e.store.Hold(context.Background(), entryID); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "assigned issue", open: "issues-opened", close: "issues-closed", wantStatus: queue.StatusAssigned,
			wantReason: "1 assigned item(s) asked to stop",
			prepare: func(t *testing.T, e *testEnv, entryID string) {
				res, err := e.store.Lease(context.Background(), queue.LeaseParams{Max: 1, OwnerID: "test-worker", WorkflowIDs: []string{"wf-1"}})
				if err != nil || len(res.Leased) != 1 || res.Leased[0].Entry.EntryID != entryID {
					t.Fatalf("lease: %+v %v", res, err)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, defaultOptions())
			event := eventOf(tc.open)
			_, opened := e.post(t, request{event: event, delivery: "open", body: payload(t, tc.open)})
			if opened.Outcome != webhook.OutcomeEnqueued {
				t.Fatalf("open: %+v", opened)
			}
			if tc.prepare != nil {
				tc.prepare(t, e, opened.EntryID)
			}
			status, resp := e.post(t, request{event: event, delivery: "close", body: payload(t, tc.close)})
			if status != 200 || resp.Outcome != webhook.OutcomeCancelled || resp.EntryID != opened.EntryID ||
				resp.QualifiedID != opened.QualifiedID || resp.Generation == nil || *resp.Generation != 1 {
				t.Fatalf("close answer %d %+v, want cancelled naming %s", status, resp, opened.EntryID)
			}
			if !strings.Contains(resp.Reason, tc.wantReason) {
				t.Errorf("reason %q, want %q", resp.Reason, tc.wantReason)
			}
			if it := e.item(t, opened.EntryID); it.Status() != tc.wantStatus {
				t.Errorf("item status %s, want %s", it.Status(), tc.wantStatus)
			}
			if d := e.delivery(t, "close"); d.Outcome != "cancelled" || d.EntryID.String() != opened.EntryID || dbq.Deref(d.Action) != "closed" {
				t.Errorf("close row %s %v %v", d.Outcome, d.EntryID, dbq.Deref(d.Action))
			}
			// A second close finds nothing pending or held left.
			if tc.wantStatus == queue.StatusCancelled {
				_, again := e.post(t, request{event: event, delivery: "close-again", body: payload(t, tc.close)})
				if again.Outcome != webhook.OutcomeIgnored || again.EntryID != "" {
					t.Errorf("second close %+v, want ignored", again)
				}
			}
			if tc.reopen != "" {
				_, re := e.post(t, request{event: event, delivery: "reopen", body: payload(t, tc.reopen)})
				if re.Outcome != webhook.OutcomeEnqueued || re.Generation == nil || *re.Generation != 2 {
					t.Errorf("reopen %+v, want generation 2 enqueued", re)
				}
			}
		})
	}
}

// TestReplays: GitHub redelivers with the same delivery ID; every arrival
// is counted and only the first acts.
func TestReplays(t *testing.T) {
	t.Parallel()
	t.Run("sequential", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, defaultOptions())
		body := payload(t, "pull_request-opened")
		var first webhook.Response
		for i := range 3 {
			status, resp := e.post(t, request{event: "pull_request", delivery: "redelivered", body: body})
			if i == 0 {
				if status != 202 || resp.Outcome != webhook.OutcomeEnqueued {
					t.Fatalf("first: %d %+v", status, resp)
				}
				first = resp
				continue
			}
			if status != 200 || resp.Outcome != webhook.OutcomeReplay || resp.EntryID != first.EntryID ||
				resp.QualifiedID != first.QualifiedID || resp.Generation == nil || *resp.Generation != 1 ||
				resp.Reason != "first answered enqueued" {
				t.Fatalf("arrival %d: %d %+v, want replay of %+v", i+1, status, resp, first)
			}
		}
		d := e.delivery(t, "redelivered")
		if d.Attempts != 3 || d.Outcome != "enqueued" || d.LastReceivedAt.Before(d.ReceivedAt) {
			t.Errorf("row attempts %d outcome %s received %v last %v", d.Attempts, d.Outcome, d.ReceivedAt, d.LastReceivedAt)
		}
		if n := e.count(t, "work_items"); n != 1 {
			t.Errorf("%d items, want 1", n)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, defaultOptions())
		body := payload(t, "issues-opened")
		const n = 20
		rqs := make([]request, n)
		for i := range rqs {
			rqs[i] = request{event: "issues", delivery: "burst", body: body}
		}
		answers := e.burst(t, rqs)
		var enqueued, replays int
		var entry string
		for _, a := range answers {
			switch a.Outcome {
			case webhook.OutcomeEnqueued:
				enqueued++
				entry = a.EntryID
			case webhook.OutcomeReplay:
				replays++
			default:
				t.Errorf("answer %+v", a)
			}
		}
		if enqueued != 1 || replays != n-1 {
			t.Fatalf("%d enqueued, %d replays; want 1 and %d", enqueued, replays, n-1)
		}
		for _, a := range answers {
			if a.EntryID != entry {
				t.Errorf("answer names %s, want %s", a.EntryID, entry)
			}
		}
		if d := e.delivery(t, "burst"); d.Attempts != n || d.Outcome != "enqueued" {
			t.Errorf("row attempts %d outcome %s, want %d enqueued", d.Attempts, d.Outcome, n)
		}
		if c := e.count(t, "work_items"); c != 1 {
			t.Errorf("%d items, want 1", c)
		}
	})
	t.Run("other body", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, defaultOptions())
		e.post(t, request{event: "issues", delivery: "reused", body: payload(t, "issues-opened")})
		status, resp := e.post(t, request{event: "issues", delivery: "reused", body: payload(t, "issues-reopened")})
		if status != http.StatusConflict || resp.Outcome != webhook.OutcomeIdempotencyConflict || resp.EntryID != "" {
			t.Fatalf("answer %d %+v, want 409 idempotency_conflict", status, resp)
		}
		// The same JSON form-encoded is another body too.
		status, _ = e.post(t, request{event: "issues", delivery: "reused", body: payload(t, "issues-opened"), form: true})
		if status != http.StatusConflict {
			t.Errorf("form-encoded redelivery: %d, want 409", status)
		}
		if d := e.delivery(t, "reused"); d.Attempts != 3 || d.Outcome != "enqueued" {
			t.Errorf("row attempts %d outcome %s", d.Attempts, d.Outcome)
		}
		if n := e.count(t, "work_items"); n != 1 {
			t.Errorf("%d items, want 1", n)
		}
	})
	t.Run("ignored delivery", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, defaultOptions())
		e.post(t, request{event: "ping", delivery: "ping", body: payload(t, "ping")})
		status, resp := e.post(t, request{event: "ping", delivery: "ping", body: payload(t, "ping")})
		if status != 200 || resp.Outcome != webhook.OutcomeReplay || resp.Reason != "first answered ignored: ping" || resp.EntryID != "" {
			t.Errorf("answer %d %+v", status, resp)
		}
	})
	t.Run("collision replayed", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, defaultOptions())
		_, first := e.post(t, request{event: "issues", delivery: "a", body: payload(t, "issues-opened")})
		e.post(t, request{event: "issues", delivery: "b", body: payload(t, "issues-reopened")})
		// The holder finishes; a redelivery of b still names what b's first
		// answer named and creates nothing.
		if _, err := e.store.Drop(context.Background(), first.EntryID); err != nil {
			t.Fatal(err)
		}
		_, resp := e.post(t, request{event: "issues", delivery: "b", body: payload(t, "issues-reopened")})
		if resp.Outcome != webhook.OutcomeReplay || resp.EntryID != first.EntryID || !strings.HasPrefix(resp.Reason, "first answered subject_collision") {
			t.Errorf("answer %+v", resp)
		}
		if n := e.count(t, "work_items"); n != 1 {
			t.Errorf("%d items, want 1", n)
		}
	})
}

// TestRejections: nothing is stored for a delivery that is refused.
func TestRejections(t *testing.T) {
	t.Parallel()
	body := payload(t, "issues-opened")
	tests := []struct {
		name   string
		req    func() request
		status int
	}{
		{name: "wrong secret", status: 401, req: func() request {
			return request{event: "issues", delivery: "x", body: body, secret: "guess"}
		}},
		{name: "missing signature", status: 401, req: func() request {
			return request{event: "issues", delivery: "x", body: body, mutate: func(r *http.Request) { r.Header.Del(webhook.SignatureHeader) }}
		}},
		{name: "sha1 signature", status: 401, req: func() request {
			return request{event: "issues", delivery: "x", body: body, mutate: func(r *http.Request) {
				r.Header.Set(webhook.SignatureHeader, strings.Replace(r.Header.Get(webhook.SignatureHeader), "sha256=", "sha1=", 1))
			}}
		}},
		{name: "garbage signature", status: 401, req: func() request {
			return request{event: "issues", delivery: "x", body: body, mutate: func(r *http.Request) { r.Header.Set(webhook.SignatureHeader, "sha256=zz") }}
		}},
		{name: "body truncated after signing", status: 401, req: func() request {
			return request{event: "issues", delivery: "x", body: body[:len(body)/2], signature: webhook.Sign([]byte(testSecrets[0]), body)}
		}},
		{name: "truncated body, signed", status: 400, req: func() request {
			return request{event: "issues", delivery: "x", body: body[:len(body)/2]}
		}},
		{name: "wrong content type", status: 400, req: func() request {
			return request{event: "issues", delivery: "x", body: body, contentType: "text/plain"}
		}},
		{name: "missing event header", status: 400, req: func() request {
			return request{event: "", delivery: "x", body: body}
		}},
		{name: "missing delivery header", status: 400, req: func() request {
			return request{event: "issues", delivery: "", body: body}
		}},
		{name: "overlong delivery header", status: 400, req: func() request {
			return request{event: "issues", delivery: strings.Repeat("d", 257), body: body}
		}},
		{name: "not the event's JSON", status: 400, req: func() request {
			return request{event: "issues", delivery: "x", body: []byte(`{"action":"opened","issue":"1347"}`)}
		}},
		{name: "JSON array", status: 400, req: func() request {
			return request{event: "issues", delivery: "x", body: []byte(`[1,2]`)}
		}},
		{name: "issues event without repository", status: 400, req: func() request {
			return request{event: "issues", delivery: "x", body: edit(t, "issues-opened", func(m map[string]any) { delete(m, "repository") })}
		}},
		{name: "pull_request event without pull_request", status: 400, req: func() request {
			return request{event: "pull_request", delivery: "x", body: edit(t, "pull_request-opened", func(m map[string]any) { delete(m, "pull_request") })}
		}},
		{name: "issue comment without issue", status: 400, req: func() request {
			return request{event: "issue_comment", delivery: "x", body: edit(t, "issue_comment-created", func(m map[string]any) { delete(m, "issue") })}
		}},
		{name: "form without payload", status: 400, req: func() request {
			return request{event: "issues", delivery: "x", body: []byte("payloadd=%7B%7D"), contentType: webhook.ContentTypeForm}
		}},
		{name: "26 MiB body", status: 413, req: func() request {
			return request{event: "issues", delivery: "x", body: make([]byte, 26<<20)}
		}},
		{name: "26 MiB body, no Content-Length", status: 413, req: func() request {
			return request{event: "issues", delivery: "x", body: make([]byte, 26<<20), mutate: func(r *http.Request) { r.ContentLength = -1 }}
		}},
		{name: "GET", status: 405, req: func() request {
			return request{event: "issues", delivery: "x", body: body, mutate: func(r *http.Request) { r.Method = http.MethodGet }}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, defaultOptions())
			status, resp := e.post(t, tc.req())
			if status != tc.status || resp.Error == "" || resp.Outcome != "" {
				t.Errorf("answer %d %+v, want %d with an error", status, resp, tc.status)
			}
			if d, w := e.count(t, "deliveries"), e.count(t, "work_items"); d != 0 || w != 0 {
				t.Errorf("%d deliveries and %d items stored, want none", d, w)
			}
		})
	}
}

// TestSecretRotation: a delivery signed with any configured secret is
// accepted, and the index of the one that verified it is recorded.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, defaultOptions())
	for i, secret := range testSecrets {
		id := fmt.Sprintf("rotation-%d", i)
		status, resp := e.post(t, request{event: "ping", delivery: id, body: payload(t, "ping"), secret: secret})
		if status != 200 || resp.Outcome != webhook.OutcomeIgnored {
			t.Fatalf("signed with secret %d: %d %+v", i, status, resp)
		}
		if d := e.delivery(t, id); int(d.SecretIndex) != i {
			t.Errorf("secret_index %d, want %d", d.SecretIndex, i)
		}
	}
}

// TestPullRequestLookupFails: a GitHub failure is no fault of the delivery:
// 503, nothing stored, and a redelivery succeeds once GitHub answers.
func TestPullRequestLookupFails(t *testing.T) {
	t.Parallel()
	prs := newFakePRs(t)
	prs.err = fmt.Errorf("GET /repos/octocat/Hello-World/pulls/1348: 502 Bad Gateway")
	opts := defaultOptions()
	opts.prs = prs
	e := newEnv(t, opts)
	rq := request{event: "issue_comment", delivery: "lookup", body: payload(t, "issue_comment-created-pr")}
	if status, resp := e.post(t, rq); status != http.StatusServiceUnavailable || resp.Error == "" {
		t.Fatalf("answer %d %+v, want 503", status, resp)
	}
	if n := e.count(t, "deliveries"); n != 0 {
		t.Fatalf("%d deliveries stored", n)
	}
	prs.err = nil
	if status, resp := e.post(t, rq); status != 202 || resp.QualifiedID != prQID {
		t.Fatalf("redelivery %d %+v", status, resp)
	}
}

// TestOnOutcome: the hook runs inside the delivery's transaction with the
// answer; its failure rolls everything back and answers 503.
func TestOnOutcome(t *testing.T) {
	t.Parallel()
	var seen []webhook.Result
	fail := false
	opts := defaultOptions()
	opts.handler.OnOutcome = func(ctx context.Context, tx pgx.Tx, r webhook.Result) error {
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM work_items").Scan(&n); err != nil {
			return err
		}
		if want := len(seen)/2 + 1; r.Outcome == webhook.OutcomeEnqueued && n != want {
			t.Errorf("hook sees %d items in its transaction, want %d", n, want)
		}
		seen = append(seen, r)
		if fail {
			return fmt.Errorf("outbox is full")
		}
		return nil
	}
	e := newEnv(t, opts)
	e.post(t, request{event: "issues", delivery: "a", body: payload(t, "issues-opened")})
	e.post(t, request{event: "issues", delivery: "a", body: payload(t, "issues-opened")})
	if len(seen) != 2 || seen[0].Outcome != webhook.OutcomeEnqueued || seen[1].Outcome != webhook.OutcomeReplay ||
		seen[0].Event != "issues" || seen[0].Decision.Kind != webhook.KindEnqueue || seen[1].EntryID != seen[0].EntryID {
		t.Fatalf("hook saw %+v", seen)
	}
	fail = true
	if status, _ := e.post(t, request{event: "pull_request", delivery: "b", body: payload(t, "pull_request-opened")}); status != http.StatusServiceUnavailable {
		t.Fatalf("failing hook: %d, want 503", status)
	}
	if d, w := e.count(t, "deliveries"), e.count(t, "work_items"); d != 1 || w != 1 {
		t.Errorf("%d deliveries and %d items after a failed hook, want 1 and 1", d, w)
	}
}

// TestBodyBuffersAreReusedCleanly: the intake reads bodies into buffers it
// reuses; a delivery after a larger one (whose buffer was kept, or was too
// large to keep) is recorded from its own bytes only.
func TestBodyBuffersAreReusedCleanly(t *testing.T) {
	t.Parallel()
	var big map[string]any
	if err := json.Unmarshal(payload(t, "issues-opened"), &big); err != nil {
		t.Fatal(err)
	}
	for i, size := range []int{200 << 10, 1 << 20} { // kept for reuse, and not
		e := newEnv(t, defaultOptions())
		big["issue"].(map[string]any)["body"] = strings.Repeat("x", size)
		body, err := json.Marshal(big)
		if err != nil {
			t.Fatal(err)
		}
		if status, resp := e.post(t, request{event: "issues", delivery: fmt.Sprintf("d-big-%d", i), body: body}); status != 202 {
			t.Fatalf("large delivery: %d %+v", status, resp)
		}
		small := payload(t, "pull_request-opened")
		status, resp := e.post(t, request{event: "pull_request", delivery: fmt.Sprintf("d-small-%d", i), body: small})
		if status != 202 {
			t.Fatalf("small delivery: %d %+v", status, resp)
		}
		sum := sha256.Sum256(small)
		if d := e.delivery(t, fmt.Sprintf("d-small-%d", i)); d.BodySha256 != hex.EncodeToString(sum[:]) {
			t.Errorf("small delivery recorded with hash %s, want its body's", d.BodySha256)
		}
		var pr struct {
			PullRequest struct{ Body string } `json:"pull_request"`
		}
		if err := json.Unmarshal(small, &pr); err != nil {
			t.Fatal(err)
		}
		d, _ := dispatchOf(t, e.item(t, resp.EntryID))
		if d.Subject.Description != pr.PullRequest.Body {
			t.Errorf("small delivery's description %.40q…, want its own %.40q", d.Subject.Description, pr.PullRequest.Body)
		}
	}
}
