package webhook_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/webhook"
)

// issueOpened is the issues-opened fixture about issue number n.
func issueOpened(tb testing.TB, n int) []byte {
	return edit(tb, "issues-opened", func(m map[string]any) {
		obj(m, "issue")["number"] = n
		obj(m, "issue")["id"] = 1_000_000 + n
	})
}

// groupCounts counts the groups a handler committed and rolled back.
type groupCounts struct{ committed, rolledBack atomic.Int32 }

// groupedEnv is a handler that records at most slots groups at a time, so
// that a burst waits in groups, and counts them.
func groupedEnv(t *testing.T, slots int) (*testEnv, *groupCounts) {
	t.Helper()
	var c groupCounts
	opts := defaultOptions()
	opts.handler = webhook.HandlerConfig{GroupSize: 8, Groups: slots, OnGroup: func(_ int, committed bool) {
		if committed {
			c.committed.Add(1)
		} else {
			c.rolledBack.Add(1)
		}
	}}
	return newEnv(t, opts), &c
}

func outcomes(answers []webhook.Response) string {
	count := map[webhook.Outcome]int{}
	for _, a := range answers {
		count[a.Outcome]++
	}
	return fmt.Sprint(count)
}

// A burst of deliveries recorded in groups answers exactly as deliveries
// recorded one by one: every first arrival of a new subject enqueued once,
// concurrent redeliveries of one delivery answered replay, deliveries about
// one subject answered subject_collision but one, and nothing else stored;
// with one group at a time (racing the deliveries recorded alone) and with
// several (racing each other too).
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	for _, slots := range []int{1, 3} {
		t.Run(fmt.Sprintf("groups=%d", slots), func(t *testing.T) {
			t.Parallel()
			testGroupCommit(t, slots)
		})
	}
}

func testGroupCommit(t *testing.T, slots int) {
	const (
		fresh      = 60 // deliveries, each about a subject of its own
		redeliver  = 12 // arrivals of one delivery ID, same body
		colliding  = 12 // deliveries about one subject
		collidesOn = 9_999
	)
	e, groups := groupedEnv(t, slots)
	pool := e.pool
	var rqs []request
	for i := range fresh {
		rqs = append(rqs, request{event: "issues", delivery: fmt.Sprintf("fresh-%d", i), body: issueOpened(t, i+1)})
	}
	for range redeliver {
		rqs = append(rqs, request{event: "issues", delivery: "again", body: issueOpened(t, 5_000)})
	}
	for i := range colliding {
		rqs = append(rqs, request{event: "issues", delivery: fmt.Sprintf("collide-%d", i), body: issueOpened(t, collidesOn)})
	}
	answers := e.burst(t, rqs)
	want := map[webhook.Outcome]int{
		webhook.OutcomeEnqueued:         fresh + 1 + 1,
		webhook.OutcomeReplay:           redeliver - 1,
		webhook.OutcomeSubjectCollision: colliding - 1,
	}
	if got := outcomes(answers); got != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	if groups.committed.Load() == 0 {
		t.Errorf("no group was committed: the burst was recorded one by one")
	}
	if n := e.count(t, "work_items"); n != fresh+2 {
		t.Errorf("%d items, want %d", n, fresh+2)
	}
	if n := e.count(t, "deliveries"); n != fresh+1+colliding {
		t.Errorf("%d delivery rows, want %d", n, fresh+1+colliding)
	}
	if d := e.delivery(t, "again"); d.Attempts != redeliver || d.Outcome != string(webhook.OutcomeEnqueued) {
		t.Errorf("redelivered row: %d attempts, outcome %s; want %d, enqueued", d.Attempts, d.Outcome, redeliver)
	}
	var live, subjects int
	if err := pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT canonical_id) FROM work_items
		WHERE status IN ('pending', 'assigned', 'held')`).Scan(&live, &subjects); err != nil {
		t.Fatal(err)
	}
	if live != fresh+2 || subjects != live {
		t.Errorf("%d live items over %d subjects, want %d each", live, subjects, fresh+2)
	}
	// Each answer names the item its delivery row names, and a row written
	// in a group holds what one written alone holds.
	for i, a := range answers {
		d := e.delivery(t, rqs[i].delivery)
		if d.EntryID == nil || d.EntryID.String() != a.EntryID {
			t.Errorf("%s answered %s, its row names %v", rqs[i].delivery, a.EntryID, d.EntryID)
		}
		if a.Outcome != webhook.OutcomeEnqueued {
			continue
		}
		sum := sha256.Sum256(rqs[i].body)
		got := fmt.Sprint(d.Event, dbq.Deref(d.Action), dbq.Deref(d.InstallationID), dbq.Deref(d.RepositoryID), dbq.Deref(d.Repository),
			dbq.Deref(d.Sender), d.SecretIndex, d.BodySha256, d.Outcome, d.Reason, dbq.Deref(d.QualifiedID), dbq.Deref(d.Generation))
		want := fmt.Sprint("issues", "opened", installID, repoID, repoName, "octocat", 0, hex.EncodeToString(sum[:]),
			"enqueued", (*string)(nil), a.QualifiedID, 1)
		if got != want {
			t.Errorf("%s: row %s, want %s", rqs[i].delivery, got, want)
		}
	}
}

// A group whose commit fails (here a delivery ID recorded before with
// another body: its item inserts, its delivery row violates the primary key
// at the COMMIT) is rolled back whole: every member is then recorded on its
// own, the others enqueued as if the group had never been. (A burst is
// sent until the reused ID lands in a group rather than alone.)
func TestGroupCommitFailureRecordsMembersAlone(t *testing.T) {
	t.Parallel()
	e, groups := groupedEnv(t, 1)
	const fresh = 30
	items := 0
	for round := 0; groups.rolledBack.Load() == 0; round++ {
		if round == 20 {
			t.Fatal("the reused delivery ID was never recorded in a group")
		}
		reused := fmt.Sprintf("reused-%d", round)
		if status, resp := e.post(t, request{event: "ping", delivery: reused, body: payload(t, "ping")}); status != 200 || resp.Outcome != webhook.OutcomeIgnored {
			t.Fatalf("ping: %d %+v", status, resp)
		}
		rqs := []request{{event: "issues", delivery: reused, body: issueOpened(t, 1_000*round+999)}}
		for i := range fresh {
			rqs = append(rqs, request{event: "issues", delivery: fmt.Sprintf("fresh-%d-%d", round, i), body: issueOpened(t, 1_000*round+1+i)})
		}
		answers := e.burst(t, rqs)
		items += fresh
		want := fmt.Sprint(map[webhook.Outcome]int{webhook.OutcomeEnqueued: fresh, webhook.OutcomeIdempotencyConflict: 1})
		if got := outcomes(answers); got != want {
			t.Fatalf("round %d: outcomes %v, want %v", round, got, want)
		}
		if answers[0].Outcome != webhook.OutcomeIdempotencyConflict {
			t.Errorf("round %d: the reused delivery ID answered %+v", round, answers[0])
		}
		if n := e.count(t, "work_items"); n != items {
			t.Fatalf("round %d: %d items, want %d", round, n, items)
		}
		if d := e.delivery(t, reused); d.Outcome != string(webhook.OutcomeIgnored) || d.Attempts != 2 {
			t.Errorf("round %d: reused row: outcome %s after %d attempts, want ignored after 2", round, d.Outcome, d.Attempts)
		}
	}
}
