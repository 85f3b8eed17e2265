package webhook_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// TestSubjectMetaMatchesReadMeta: reading the metadata from the subject an
// item is enqueued with gives what ReadMeta reads from its stored dispatch,
// for every fixture that enqueues, and for subjects that name no GitHub item.
func TestSubjectMetaMatchesReadMeta(t *testing.T) {
	m, err := webhook.NewMapper(newFakePRs(t), webhook.MapperConfig{BranchPrefix: "gitlease/"})
	if err != nil {
		t.Fatal(err)
	}
	enqueues := 0
	for name, body := range allPayloads(t) {
		dec, err := m.Map(context.Background(), eventOf(name), "meta-"+name, body)
		if err != nil || dec.Kind != webhook.KindEnqueue {
			continue
		}
		enqueues++
		stored, err := json.Marshal(dec.Enqueue.Dispatch)
		if err != nil {
			t.Fatal(err)
		}
		want, wantOK := webhook.ReadMeta(stored)
		got, gotOK := webhook.SubjectMeta(dec.Enqueue.Dispatch.Subject)
		if got != want || gotOK != wantOK || !gotOK {
			t.Errorf("%s: SubjectMeta = %+v, %v; ReadMeta of the dispatch = %+v, %v", name, got, gotOK, want, wantOK)
		}
	}
	if enqueues == 0 {
		t.Fatal("no fixture enqueues")
	}
	for _, s := range []*queue.SubjectRef{
		nil,
		{Kind: "animus.task", ID: "t-1"},
		{Kind: webhook.KindPullRequest, ID: "1#2", Metadata: json.RawMessage(`{"repository":"o/r","number":2}`)},
		{Kind: webhook.KindIssue, ID: "1#2", Metadata: json.RawMessage(`{"installation_id":"x"}`)},
	} {
		if m, ok := webhook.SubjectMeta(s); ok {
			t.Errorf("SubjectMeta(%+v) = %+v, true; want false", s, m)
		}
	}
}
