package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
)

// GroupAnswer is one request's answer from EnqueueGroupTx: a new item, or
// Err (ErrTaken, *InvalidError) with nothing written for it.
type GroupAnswer struct {
	Result EnqueueResult
	Err    error
}

// EnqueueGroupTx is EnqueueTxOptimistic for several requests in tx, for a
// caller that records a group of deliveries in one transaction. The
// requests that have an idempotency key and a reservation and no run_at or
// expiry (every webhook delivery's) are inserted by one statement, in the
// order of their subjects so that two groups lock subjects' generations in
// the same order; any other request by a statement of its own.
//
// The answers are in the order of ps. A request whose key, subject or
// reservation is taken, by an existing item or by an earlier request of the
// group, answers ErrTaken; a malformed one *InvalidError. Neither wrote
// anything, and tx stays usable. An error returned instead (a unique
// violation of a race the probes could not see, the database) means tx
// cannot commit.
func (s *Store) EnqueueGroupTx(ctx context.Context, tx pgx.Tx, ps []EnqueueParams) (_ []GroupAnswer, err error) {
	defer s.timed("enqueue_group", time.Now(), &err)
	now := s.now()
	answers := make([]GroupAnswer, len(ps))
	type member struct {
		i   int
		pe  preparedEnqueue
		ins dbq.WorkItemInsertNextGenerationParams
	}
	var grouped, single []member
	taken := map[string]bool{}
	for i, p := range ps {
		pe, err := prepareEnqueue(p)
		if err != nil {
			answers[i].Err = err
			continue
		}
		if pe.key == "" || pe.res == nil || pe.runAt != nil || pe.expireAfter != nil {
			single = append(single, member{i: i, pe: pe}) // s.insert makes its own row
			continue
		}
		// The statement's probes do not see its own rows: a second request
		// for the same key, subject or branch waits for its own statement.
		claims := []string{"key\x00" + pe.key, "subject\x00" + pe.canonicalID,
			"branch\x00" + strings.ToLower(pe.res.Repository) + "\n" + pe.res.HeadRef}
		if slices.ContainsFunc(claims, func(c string) bool { return taken[c] }) {
			answers[i].Err = ErrTaken
			continue
		}
		for _, c := range claims {
			taken[c] = true
		}
		grouped = append(grouped, member{i: i, pe: pe, ins: s.insertParams(pe, now)})
	}
	slices.SortFunc(grouped, func(a, b member) int { return cmp.Compare(a.pe.canonicalID, b.pe.canonicalID) })

	if len(grouped) > 0 {
		args := dbq.WorkItemInsertNextGenerationsParams{EnqueuedAt: now}
		for _, m := range grouped {
			args.Ids = append(args.Ids, m.ins.ID)
			args.CanonicalIds = append(args.CanonicalIds, m.ins.CanonicalID)
			args.TaskIds = append(args.TaskIds, m.pe.taskID)
			args.Dispatches = append(args.Dispatches, m.ins.Dispatch)
			args.IdempotencyKeys = append(args.IdempotencyKeys, m.pe.key)
			args.RequestHashes = append(args.RequestHashes, m.pe.hash)
			args.Repositories = append(args.Repositories, m.pe.res.Repository)
			args.BaseRefs = append(args.BaseRefs, m.pe.res.BaseRef)
			args.HeadRefs = append(args.HeadRefs, m.pe.res.HeadRef)
			args.Sources = append(args.Sources, m.pe.source)
			args.TraceParents = append(args.TraceParents, m.pe.traceParent)
		}
		rows, err := s.q.WorkItemInsertNextGenerations(ctx, tx, args)
		if err != nil {
			return nil, fmt.Errorf("insert work items: %w", err)
		}
		var items []Item
		for _, m := range grouped {
			j := slices.IndexFunc(rows, func(r dbq.WorkItemInsertNextGenerationsRow) bool { return r.ID == m.ins.ID })
			if j < 0 {
				answers[m.i].Err = ErrTaken
				continue
			}
			r := rows[j]
			row := insertedRow(m.ins, dbq.WorkItemInsertNextGenerationRow{Position: r.Position, SubjectGeneration: r.SubjectGeneration, CollisionKey: r.CollisionKey})
			items = append(items, Item{row: row, subject: m.pe.subject})
			answers[m.i].Result = enqueued(row, m.pe)
		}
		if err := s.observeGroup(ctx, tx, items); err != nil {
			return nil, err
		}
	}
	for _, m := range single {
		res, err := s.insert(ctx, tx, m.pe, now)
		switch {
		case errors.Is(err, ErrTaken):
			answers[m.i].Err = err
		case err != nil:
			return nil, err
		default:
			answers[m.i].Result = res
		}
	}
	return answers, nil
}

// observeGroup tells the Observer of a group's new items: at once when it
// is a GroupObserver, else one by one.
func (s *Store) observeGroup(ctx context.Context, tx pgx.Tx, items []Item) error {
	if g, ok := s.cfg.Observer.(GroupObserver); ok {
		if err := g.EnqueuedGroup(ctx, tx, items); err != nil {
			return fmt.Errorf("observe enqueues: %w", err)
		}
		return nil
	}
	for _, it := range items {
		if err := s.cfg.Observer.Enqueued(ctx, tx, it); err != nil {
			return fmt.Errorf("observe enqueue: %w", err)
		}
	}
	return nil
}
