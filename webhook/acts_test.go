package webhook_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gitlease/gitlease/webhook"
)

func TestActs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		event, action string
		labelTrigger  bool
		want          bool
	}{
		{"issues", "opened", false, true},
		{"issues", "reopened", false, true},
		{"issues", "closed", false, true},
		{"issues", "edited", false, false},
		{"issues", "labeled", false, false},
		{"issues", "labeled", true, true},
		{"issues", "unlabeled", true, false},
		{"pull_request", "opened", false, true},
		{"pull_request", "synchronize", false, true},
		{"pull_request", "ready_for_review", false, true},
		{"pull_request", "closed", false, true},
		{"pull_request", "labeled", false, false},
		{"pull_request", "labeled", true, true},
		{"pull_request", "edited", true, false},
		{"issue_comment", "created", false, true},
		{"issue_comment", "edited", false, false},
		{"issue_comment", "labeled", true, false},
		{"check_run", "rerequested", false, true},
		{"check_run", "completed", false, false},
		{"check_suite", "rerequested", false, true},
		{"check_suite", "completed", false, false},
		{"installation", "deleted", false, true},
		{"installation", "suspend", false, true},
		{"installation", "unsuspend", false, true},
		{"installation", "created", false, false},
		{"installation_repositories", "removed", false, true},
		{"installation_repositories", "added", false, false},
		{"push", "", false, false},
		{"ping", "", false, false},
		{"star", "created", true, false},
		{"", "", false, false},
	}
	for _, c := range cases {
		if got := webhook.Acts(c.event, c.action, c.labelTrigger); got != c.want {
			t.Errorf("Acts(%q, %q, %v) = %v, want %v", c.event, c.action, c.labelTrigger, got, c.want)
		}
	}
}

// TestActsCoversMapper checks Acts against the mapper itself: every
// fixture, under every action GitHub sends for its event and with and
// without a trigger label, that the mapper does not ignore is one Acts is
// true for. A delivery Acts rejects is never one gitlease would have acted
// on, so the reconciler never leaves such a delivery unrecovered.
func TestActsCoversMapper(t *testing.T) {
	t.Parallel()
	actions := []string{"opened", "reopened", "closed", "edited", "labeled", "unlabeled", "synchronize",
		"ready_for_review", "converted_to_draft", "created", "deleted", "assigned", "rerequested", "completed"}
	for name, raw := range allPayloads(t) {
		event := eventOf(name)
		for _, label := range []string{"", "bug", "gitlease"} {
			m, err := webhook.NewMapper(newFakePRs(t), webhook.MapperConfig{TriggerLabel: label, BranchPrefix: "gitlease/"})
			if err != nil {
				t.Fatal(err)
			}
			for _, action := range actions {
				var obj map[string]any
				if err := json.Unmarshal(raw, &obj); err != nil {
					t.Fatal(err)
				}
				obj["action"] = action
				body, _ := json.Marshal(obj)
				dec, err := m.Map(context.Background(), event, "acts-"+name, body)
				if err != nil {
					continue // a payload error is answered 400, never acted on
				}
				if dec.Kind != webhook.KindIgnore && !webhook.Acts(event, action, label != "") {
					t.Errorf("%s with action %q (trigger label %q) is mapped to %v, but Acts is false", name, action, label, dec.Kind)
				}
			}
		}
	}
}
