package worker

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/worker/sandbox"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// TestRemoteWorkerPassesTheTraceParent: an item enqueued with a trace
// parent is leased over /rpc with it (QueueEntry's trace_parent), and the
// remote worker's command gets it as TRACEPARENT; an item without one gets
// no TRACEPARENT.
func TestRemoteWorkerPassesTheTraceParent(t *testing.T) {
	t.Parallel()
	store, _, client := newRPCQueue(t, time.Minute)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	enqueue := func(n int, traceParent string) string {
		res, err := store.Enqueue(context.Background(), queue.EnqueueParams{
			Dispatch: queue.SubjectDispatch{
				Subject:     &queue.SubjectRef{Kind: webhook.KindIssue, ID: "1296269#" + strconv.Itoa(n), Title: "traced"},
				WorkflowRef: "coding", TriggerSource: "test", RequestedAt: queue.Timestamp{Time: time.Now().UTC().Truncate(time.Second)},
			},
			TraceParent: traceParent,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.EntryID
	}
	traced, plain := enqueue(1, tp), enqueue(2, "")
	dir := t.TempDir()
	w, err := NewRemoteWorker(client, WorkerConfig{Slots: 2, OwnerID: "remote-trace", Poll: 100 * time.Millisecond, Env: os.Environ(), Sandbox: sandbox.None,
		Exec: `env > '` + dir + `/env.'"$GITLEASE_ENTRY_ID"`}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	waitStatus(t, store, traced, queue.StatusCompleted, 20*time.Second)
	waitStatus(t, store, plain, queue.StatusCompleted, 20*time.Second)
	if got := readEnv(t, dir+"/env."+traced)["TRACEPARENT"]; got != tp {
		t.Errorf("the traced item's command saw TRACEPARENT %q, want %q", got, tp)
	}
	if got, set := readEnv(t, dir+"/env."+plain)["TRACEPARENT"]; set {
		t.Errorf("the untraced item's command saw TRACEPARENT %q", got)
	}
}
