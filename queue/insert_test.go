package queue

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbtest"
)

// recordingObserver keeps the items it is told were enqueued.
type recordingObserver struct {
	nopObserver
	enqueued []Item
}

func (o *recordingObserver) ObservesEnqueue(*SubjectRef) bool { return true }

func (o *recordingObserver) Enqueued(_ context.Context, _ pgx.Tx, it Item) error {
	o.enqueued = append(o.enqueued, it)
	return nil
}

// TestInsertedRowIsTheStoredRow: the item the Observer is handed for a new
// enqueue, built from what was sent and the few columns the insert
// returns, is the row the database stored, column for column.
func TestInsertedRowIsTheStoredRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	obs := &recordingObserver{}
	s := NewStore(dbtest.New(t), Config{LeaseTTL: time.Minute, Observer: obs,
		Now: func() time.Time { return time.Date(2026, 10, 1, 12, 0, 0, 123456789, time.UTC) }})
	secs := uint64(90)
	subject := func(id string) SubjectDispatch {
		return SubjectDispatch{Subject: &SubjectRef{Kind: "github_issue", ID: id, Title: "t", Description: "d",
			Labels: []string{"b"}, Metadata: json.RawMessage(`{"n":1e3,"s":"x"}`)},
			WorkflowRef: "coding", TriggerSource: "test", Priority: "high"}
	}
	for _, p := range []EnqueueParams{
		{Dispatch: subject("1#1")},
		{Dispatch: SubjectDispatch{Subject: &SubjectRef{Kind: KindTask, ID: "t-1"}, WorkflowRef: "w"}},
		{Dispatch: subject("1#2"), IdempotencyKey: " k-2 ", RunAt: "2030-01-02T03:04:05.987654321+02:00", ExpireAfterSecs: &secs,
			Reservation: &Reservation{Repository: " Octo/Repo ", BaseRef: "refs/heads/main", HeadRef: "refs/heads/x"}, FromGitHub: true},
	} {
		res, err := s.Enqueue(ctx, p)
		if err != nil || !res.Enqueued {
			t.Fatalf("enqueue %+v: %+v, %v", p, res, err)
		}
		sent := obs.enqueued[len(obs.enqueued)-1]
		stored, err := s.Get(ctx, res.EntryID)
		if err != nil {
			t.Fatal(err)
		}
		// The dispatch is the same JSON value, spelled as jsonb spells it.
		if !jsonEqual(t, sent.row.Dispatch, stored.row.Dispatch) {
			t.Errorf("dispatch handed on %s, stored %s", sent.row.Dispatch, stored.row.Dispatch)
		}
		a, b := sent.row, stored.row
		a.Dispatch, b.Dispatch = nil, nil
		inUTC(&a)
		inUTC(&b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("row handed on\n%+v\nstored\n%+v", a, b)
		}
	}
}

// jsonEqual reports whether a and b hold the same JSON value (numbers
// compared as jsonb compares them, by value).
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(raw []byte) (v any) {
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// inUTC sets every time of the row pointed to by row in UTC, so that rows
// compare by instant, not by the location a time was read in.
func inUTC(row any) {
	v := reflect.ValueOf(row).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i).Addr().Interface().(type) {
		case *time.Time:
			*f = f.UTC()
		case **time.Time:
			if *f != nil {
				*f = new((*f).UTC())
			}
		}
	}
}
