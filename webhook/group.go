package webhook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// Group commit: first arrivals that wait at the same time are recorded in
// one transaction.
//
// Under load much of a delivery's database cost is not its rows but its
// transaction and statements: BEGIN, COMMIT and its WAL flush, each
// statement's start-up (the check constraints of work_items are read
// and prepared anew for every statement), and the round trips, on both
// sides of the connection. Deliveries that arrive while others are being
// committed join the next group instead, up to HandlerConfig.GroupSize, at
// most HandlerConfig.Groups groups at once. A group is one transaction: one
// statement creates its members' items (queue.Store.EnqueueGroupTx), and
// their delivery rows go with the COMMIT. Each delivery's record and item
// still commit together before its answer; a group only ever adds
// deliveries to a commit. An arrival alone (the usual case at low load) is
// recorded in the transaction it had before: nothing waits for company.
//
// A group holds only the fast path of first arrivals of enqueue decisions.
// A delivery whose insert found its key, subject or reservation taken (a
// replay, a collision) wrote nothing and is set aside; after the group
// commits, it is recorded on its own (Handler.recordAlone), which answers it
// from what is stored. If the group's transaction fails for any reason (a
// race on a unique index, a redelivery in flight, a deadlock), it is rolled
// back whole and every member is recorded on its own, so no member depends
// on another's fate; only when the database does not answer at all does
// every member answer 503 at once.

// DefaultGroupSize and DefaultGroups are HandlerConfig.GroupSize and
// HandlerConfig.Groups by default.
const (
	DefaultGroupSize = 8
	DefaultGroups    = 2
)

// committer forms the groups: arrivals queue in order, and whoever holds one
// of the slots takes the oldest ones and commits them.
type committer struct {
	size  int
	slots chan struct{}

	mu      sync.Mutex
	waiting []*member
}

// member is one arrival in a group, and what the group made of it.
type member struct {
	a     arrival
	done  chan struct{} // closed once res, err and alone are final
	taken bool          // a group holds it (committer.mu)

	res Result
	err error // the group's, when the database did not answer
	// alone: the group did not record it; its own transaction must, from
	// the start of the full path when full (its key, subject or branch is
	// taken: the fast path would only find that again).
	alone, full bool
}

func newCommitter(size, groups int) *committer {
	if size <= 1 {
		return nil
	}
	return &committer{size: size, slots: make(chan struct{}, groups)}
}

// take removes the oldest waiting arrivals, up to a group's size.
func (c *committer) take() []*member {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.waiting), c.size)
	g := slices.Clone(c.waiting[:n])
	c.waiting = slices.Delete(c.waiting, 0, n)
	for _, m := range g {
		m.taken = true
	}
	return g
}

func (c *committer) isTaken(m *member) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m.taken
}

// withdraw takes m out of the queue unless a group holds it already.
func (c *committer) withdraw(m *member) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.taken {
		return false
	}
	c.waiting = slices.DeleteFunc(c.waiting, func(w *member) bool { return w == m })
	return true
}

// errGroupWait: no group took the delivery within HandlerConfig.Timeout
// (the groups before it were slow: the database, most likely). It is
// answered 503, with nothing stored.
var errGroupWait = errors.New("no transaction could take the delivery in time")

// recordGrouped records a in the next group and returns its answer, or, if
// the group could not record it, records it on its own. A delivery waits
// for a group at most HandlerConfig.Timeout, and the group's transaction
// takes at most as long again.
func (h *Handler) recordGrouped(ctx context.Context, a arrival) (Result, error) {
	c := h.group
	m := &member{a: a, done: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, m)
	c.mu.Unlock()
	timeout := time.NewTimer(h.cfg.Timeout)
	defer timeout.Stop()
wait:
	for {
		select {
		case <-m.done:
			break wait
		default:
		}
		select {
		case <-m.done:
			break wait
		case <-timeout.C:
			if c.withdraw(m) {
				return Result{}, errGroupWait
			}
			<-m.done
			break wait
		case c.slots <- struct{}{}:
			if g := c.take(); len(g) > 0 {
				h.commitGroup(ctx, g)
			}
			<-c.slots
			// Waiting behind a full group, m leads the next one; taken, it
			// waits for the group that holds it.
			if c.isTaken(m) {
				<-m.done
				break wait
			}
		}
	}
	if m.alone {
		return h.recordAlone(ctx, a, m.full)
	}
	return m.res, m.err
}

// errGroupAborted ends a group's transaction that failed once: its members
// are recorded on their own instead of the group being tried again.
var errGroupAborted = errors.New("the group's transaction failed: record its deliveries one by one")

// commitGroup records g in one transaction and settles every member. The
// transaction is bounded by HandlerConfig.Timeout and outlives the leader's
// request: other deliveries' answers depend on it.
func (h *Handler) commitGroup(ctx context.Context, g []*member) {
	defer func() {
		for _, m := range g {
			close(m.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.Timeout)
	defer cancel()
	if len(g) == 1 {
		// Alone, its own transaction is the same work in fewer statements;
		// it still holds the slot, so that arrivals meanwhile form the next
		// group.
		g[0].res, g[0].err = h.recordAlone(ctx, g[0].a, false)
		return
	}
	// The delivery rows go in one order in every group (the queue orders
	// its own rows), so two groups racing on a redelivery wait, not deadlock.
	slices.SortFunc(g, func(x, y *member) int { return cmp.Compare(x.a.deliveryID, y.a.deliveryID) })
	err := h.store.RunTx(ctx, func(ctx context.Context, tx pgx.Tx, attempt int) (bool, error) {
		if attempt > 0 {
			return false, errGroupAborted
		}
		return h.recordGroup(ctx, tx, g)
	})
	// A group the database refused is rolled back whole: its members try
	// alone, where each gets its own answer. One the database did not
	// answer in time would not do better alone: its members answer 503.
	h.cfg.OnGroup(len(g), err == nil)
	var pgErr *pgconn.PgError
	retry := errors.As(err, &pgErr) || errors.Is(err, errGroupAborted)
	for _, m := range g {
		switch {
		case err == nil:
		case retry:
			m.alone, m.full = true, false
		default:
			m.alone, m.err = false, err
		}
	}
}

// recordGroup is the fast path of g's first arrivals in tx: one statement
// creates their items, and their delivery rows go with the COMMIT. A member
// whose key, subject or reservation is taken wrote nothing and is marked
// alone. It reports whether an item was created; an error means tx cannot
// commit.
func (h *Handler) recordGroup(ctx context.Context, tx pgx.Tx, g []*member) (bool, error) {
	ps := make([]queue.EnqueueParams, len(g))
	for i, m := range g {
		ps[i] = enqueueParams(m.a.decision, m.a.traceParent)
	}
	answers, err := h.store.EnqueueGroupTx(ctx, tx, ps)
	if err != nil {
		return false, fmt.Errorf("enqueue: %w", err)
	}
	pending := false
	var rows dbq.DeliveryInsertFirstsParams
	for i, m := range g {
		if errors.Is(answers[i].Err, queue.ErrTaken) {
			m.alone, m.full = true, true
			continue
		}
		res := Result{Event: m.a.event, Decision: m.a.decision, TraceParent: m.a.traceParent, Response: Response{DeliveryID: m.a.deliveryID}}
		res, stored, err := enqueueAnswer(res, answers[i].Result, answers[i].Err)
		var rb *rollbackError
		switch {
		case errors.As(err, &rb): // refused before anything was written
			m.res = rb.res
			continue
		case err != nil:
			return false, err
		}
		if err := h.outcome(ctx, tx, res); err != nil {
			return false, err
		}
		p := h.recordParams(m.a, stored, res)
		if stored != OutcomeEnqueued || p.EntryID == nil || p.QualifiedID == nil || p.Generation == nil || p.Reason != nil {
			// Not the enqueue DeliveryInsertFirsts stores: a row of its own.
			if err := h.q.DeliveryInsertFirst(ctx, queue.AtCommit(tx), dbq.DeliveryInsertFirstParams(p)); err != nil {
				return false, fmt.Errorf("record delivery: %w", err)
			}
		} else {
			rows.Now = p.Now
			rows.DeliveryIds, rows.Events = append(rows.DeliveryIds, p.DeliveryID), append(rows.Events, p.Event)
			rows.Actions, rows.Senders = append(rows.Actions, dbq.Deref(p.Action)), append(rows.Senders, dbq.Deref(p.Sender))
			rows.InstallationIds, rows.RepositoryIds = append(rows.InstallationIds, dbq.Deref(p.InstallationID)), append(rows.RepositoryIds, dbq.Deref(p.RepositoryID))
			rows.Repositories, rows.SecretIndexes = append(rows.Repositories, dbq.Deref(p.Repository)), append(rows.SecretIndexes, p.SecretIndex)
			rows.BodySha256s, rows.EntryIds = append(rows.BodySha256s, p.BodySha256), append(rows.EntryIds, *p.EntryID)
			rows.QualifiedIds, rows.Generations = append(rows.QualifiedIds, *p.QualifiedID), append(rows.Generations, *p.Generation)
		}
		m.res = res
		pending = pending || res.Outcome == OutcomeEnqueued
	}
	if len(rows.DeliveryIds) > 0 {
		if err := h.q.DeliveryInsertFirsts(ctx, queue.AtCommit(tx), rows); err != nil {
			return false, fmt.Errorf("record deliveries: %w", err)
		}
	}
	return pending, nil
}
