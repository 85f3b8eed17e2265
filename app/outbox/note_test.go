package outbox_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gitlease/gitlease/queue"
)

// TestLongCompletionNoteIsCut: a worker note far over GitHub's 65,535-byte
// summary limit, in multi-byte text, still concludes the check run: the
// summary quotes the note's end, cut on a character boundary, and says it
// was cut.
func TestLongCompletionNoteIsCut(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		note string
	}{
		{"two-byte runes", strings.Repeat("é", 70000) + "the end"},
		{"three-byte runes", "start " + strings.Repeat("€", 30000) + "the end"},
		{"four-byte runes, odd offset", "x" + strings.Repeat("𝄞", 20000) + "the end"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if _, err := h.store.Enqueue(context.Background(), issueParams(9)); err != nil {
				t.Fatal(err)
			}
			fe := h.leaseAll(t, "w")[0]
			h.drain(t, h.sender(t))
			res, err := h.store.Complete(context.Background(), queue.CompleteParams{Execution: fe.Execution, Status: queue.StatusCompleted, Note: tc.note})
			if err != nil || res.Outcome != queue.OutcomeApplied {
				t.Fatalf("complete: %+v %v", res, err)
			}
			h.drain(t, h.sender(t)) // fails the test if the row failed for good
			runs := h.gh.CheckRuns(repoName)
			if len(runs) != 1 || runs[0].Status != "completed" {
				t.Fatalf("check runs %+v, want one completed", runs)
			}
			sum := runs[0].Summary
			if len(sum) > 65535 || !utf8.ValidString(sum) || !strings.Contains(sum, "the end") || !strings.Contains(sum, "was cut") {
				t.Errorf("summary of %d bytes (valid UTF-8: %v), want at most 65535, ending with the note's end, saying it was cut",
					len(sum), utf8.ValidString(sum))
			}
		})
	}
}
