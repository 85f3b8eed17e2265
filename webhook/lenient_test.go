package webhook_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/webhook"
)

// lenientDir holds deliveries that differ from GitHub's current shape in
// fields gitlease does not use (docs/webhook.md): they must be processed as usual.
const lenientDir = "testdata/lenient"

// TestLenientParsing: a variant in a field gitlease does not use (integer
// or oddly formatted timestamps, new fields) never turns a real delivery
// into a 400, and text PostgreSQL cannot store (NUL) is removed from what is
// stored while the delivery is processed as usual.
func TestLenientParsing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture   string
		status    int
		outcome   webhook.Outcome
		title     string    // the stored subject title, when an item is made
		body      string    // the stored description, when checked
		labels    []string  // the stored labels, when checked
		requested time.Time // the dispatch's requested_at, when checked
	}{
		{fixture: "check_run-rerequested-int-timestamps", status: 200, outcome: webhook.OutcomeIgnored},
		{fixture: "issues-opened-odd-timestamps", status: 202, outcome: webhook.OutcomeEnqueued,
			title: "Fix the greeting typo in README", requested: time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)},
		{fixture: "pull_request-opened-int-timestamps", status: 202, outcome: webhook.OutcomeEnqueued,
			title: "Fix the greeting typo", requested: time.Unix(1700000000, 0).UTC()},
		{fixture: "issues-opened-nul", status: 202, outcome: webhook.OutcomeEnqueued,
			title: "nultitle", body: "beforeafter ", labels: []string{"bug"}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			env := newEnv(t, defaultOptions())
			id := "lenient-" + tc.fixture
			event, _, _ := strings.Cut(tc.fixture, "-")
			status, resp := env.post(t, request{event: event, delivery: id, body: fixture(t, lenientDir, tc.fixture)})
			if status != tc.status || resp.Outcome != tc.outcome {
				t.Fatalf("answer %d %+v, want %d %s", status, resp, tc.status, tc.outcome)
			}
			d := env.delivery(t, id)
			if d.Outcome != string(tc.outcome) || dbq.Deref(d.Repository) != repoName || dbq.Deref(d.Sender) != "octocat" {
				t.Fatalf("delivery row %+v", d)
			}
			if tc.title == "" {
				if n := env.count(t, "work_items"); n != 0 {
					t.Fatalf("%d work items, want none", n)
				}
				return
			}
			disp, _ := dispatchOf(t, env.item(t, resp.EntryID))
			if disp.Subject.Title != tc.title {
				t.Errorf("title %q, want %q", disp.Subject.Title, tc.title)
			}
			if tc.body != "" && disp.Subject.Description != tc.body {
				t.Errorf("description %q, want %q", disp.Subject.Description, tc.body)
			}
			if tc.labels != nil && strings.Join(disp.Subject.Labels, ",") != strings.Join(tc.labels, ",") {
				t.Errorf("labels %q, want %q", disp.Subject.Labels, tc.labels)
			}
			if !tc.requested.IsZero() && !disp.RequestedAt.Time.Equal(tc.requested) {
				t.Errorf("requested_at %v, want %v", disp.RequestedAt.Time, tc.requested)
			}
		})
	}
}

// TestMapperReadsOnlyTheEnvelope: an event gitlease does not act on is
// ignored whatever its other fields hold, and so are the fields it does not
// use of the events it acts on.
func TestMapperReadsOnlyTheEnvelope(t *testing.T) {
	t.Parallel()
	m, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ event, body string }{
		{"check_suite", `{"action":"rerequested","check_suite":"not an object","repository":{"id":1,"full_name":"a/b"}}`},
		{"star", `{"action":"created","starred_at":1700000000,"issue":"a string","pull_request":7}`},
		{"ping", `{"zen":"x","hook":"unexpected"}`},
	} {
		dec, err := m.Map(context.Background(), tc.event, "d", []byte(tc.body))
		if err != nil || dec.Kind != webhook.KindIgnore {
			t.Errorf("%s: %v %v, want ignored", tc.event, dec.Kind, err)
		}
	}
	dec, err := m.Map(context.Background(), "issues", "d", []byte(
		`{"action":"opened","issue":{"number":3,"author_association":"MEMBER","updated_at":true,"user":"?","closed_at":[1]},"repository":{"id":1,"full_name":"a/b","default_branch":"main","created_at":1}}`))
	if err != nil || dec.Kind != webhook.KindEnqueue {
		t.Fatalf("issue with odd unused fields: %v %v, want enqueue", dec.Kind, err)
	}
}
