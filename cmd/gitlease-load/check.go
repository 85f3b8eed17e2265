package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/webhook"
)

// Check is one end-of-run database check.
type Check struct {
	OK     bool
	Name   string
	Detail string
}

// Print writes "PASS name (detail)" or "FAIL name: detail".
func (c Check) Print(w io.Writer) {
	if c.OK {
		fmt.Fprintf(w, "PASS %s (%s)\n", c.Name, c.Detail)
	} else {
		fmt.Fprintf(w, "FAIL %s: %s\n", c.Name, c.Detail)
	}
}

// maxExamples is how many offending deliveries a failed check names.
const maxExamples = 5

// problems collects a check's failures, keeping the first few.
type problems struct {
	n        int
	examples []string
}

// add counts one failure, described by format and args.
func (p *problems) add(format string, args ...any) {
	p.n++
	if len(p.examples) < maxExamples {
		p.examples = append(p.examples, fmt.Sprintf(format, args...))
	}
}

// check turns p into a Check, passing with detail when p is empty.
func (p *problems) check(name, detail string) Check {
	if p.n == 0 {
		return Check{OK: true, Name: name, Detail: detail}
	}
	more := ""
	if p.n > len(p.examples) {
		more = fmt.Sprintf("; and %d more", p.n-len(p.examples))
	}
	return Check{Name: name, Detail: fmt.Sprintf("%d: %s%s", p.n, strings.Join(p.examples, "; "), more)}
}

// storedDelivery is a deliveries row, the part the checks read.
type storedDelivery struct {
	outcome  string
	entryID  string
	attempts int
}

// checkDatabase checks what l's answers promise against serve's database:
// every 2xx'd delivery recorded with its first answer, every enqueued
// answer backed by exactly one item keyed by its delivery ID and nothing
// else creating one, no subject with two live items, and replays and
// collisions answered as the spec says.
func checkDatabase(ctx context.Context, dsn string, l *ledger) ([]Check, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	answers := l.snapshot()

	var ids []string
	seen := map[string]bool{}
	okArrivals := map[string]int{} // delivery ID -> arrivals answered 2xx
	for _, a := range answers {
		if !seen[a.d.ID] {
			seen[a.d.ID] = true
			ids = append(ids, a.d.ID)
		}
		if a.ok() {
			okArrivals[a.d.ID]++
		}
	}

	stored := map[string]storedDelivery{}
	rows, err := conn.Query(ctx, `SELECT delivery_id, outcome, coalesce(entry_id::text, ''), attempts FROM deliveries WHERE delivery_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	for rows.Next() {
		var id string
		var s storedDelivery
		if err := rows.Scan(&id, &s.outcome, &s.entryID, &s.attempts); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		stored[id] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}

	items := map[string][]string{} // idempotency key -> item IDs
	rows, err = conn.Query(ctx, `SELECT idempotency_key, id::text FROM work_items WHERE idempotency_key = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read work items: %w", err)
	}
	for rows.Next() {
		var key, id string
		if err := rows.Scan(&key, &id); err != nil {
			return nil, fmt.Errorf("read work items: %w", err)
		}
		items[key] = append(items[key], id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read work items: %w", err)
	}

	var checks []Check

	// Every request answered 2xx.
	var p problems
	for _, a := range answers {
		if !a.ok() {
			status := "no answer"
			if a.status != 0 {
				status = fmt.Sprint(a.status)
			}
			p.add("%s %s: %s %s", a.role, a.d.ID, status, a.err)
		}
	}
	checks = append(checks, p.check("every request was answered 2xx", fmt.Sprintf("%d requests", len(answers))))

	// Every 2xx'd delivery recorded, with its first answer, counting its
	// arrivals.
	p = problems{}
	for id, n := range okArrivals {
		s, ok := stored[id]
		switch {
		case !ok:
			p.add("%s answered 2xx is not in deliveries", id)
		case s.attempts < n:
			p.add("%s has attempts %d but was answered 2xx %d times", id, s.attempts, n)
		}
	}
	for _, a := range answers {
		if a.role == roleReplay || !a.ok() {
			continue
		}
		if s, ok := stored[a.d.ID]; ok && (s.outcome != string(a.resp.Outcome) || s.entryID != a.resp.EntryID) {
			p.add("%s answered %s %s, recorded %s %s", a.d.ID, a.resp.Outcome, a.resp.EntryID, s.outcome, s.entryID)
		}
	}
	checks = append(checks, p.check("every delivery answered 2xx is recorded in deliveries, with its first answer",
		fmt.Sprintf("%d deliveries", len(okArrivals))))

	// Every enqueued answer has exactly one item, keyed by its delivery ID.
	p = problems{}
	enqueued := 0
	entries := map[string]string{} // entry -> delivery ID
	for _, a := range answers {
		if a.resp.Outcome != webhook.OutcomeEnqueued {
			continue
		}
		enqueued++
		got := items[a.d.ID]
		switch {
		case len(got) != 1:
			p.add("%s answered enqueued %s has %d items with it as idempotency key", a.d.ID, a.resp.EntryID, len(got))
		case got[0] != a.resp.EntryID:
			p.add("%s answered enqueued %s but its item is %s", a.d.ID, a.resp.EntryID, got[0])
		}
		if other, dup := entries[a.resp.EntryID]; dup {
			p.add("%s and %s were both answered enqueued %s", other, a.d.ID, a.resp.EntryID)
		}
		entries[a.resp.EntryID] = a.d.ID
	}
	checks = append(checks, p.check("every enqueued answer has exactly one work item, with idempotency_key = the delivery ID",
		fmt.Sprintf("%d enqueued", enqueued)))

	// Nothing else created an item.
	p = problems{}
	others := 0
	for _, a := range answers {
		if a.role == roleReplay || !a.ok() || a.resp.Outcome == webhook.OutcomeEnqueued {
			continue
		}
		others++
		if n := len(items[a.d.ID]); n > 0 {
			p.add("%s answered %s has %d items", a.d.ID, a.resp.Outcome, n)
		}
	}
	checks = append(checks, p.check("no delivery answered otherwise than enqueued created a work item",
		fmt.Sprintf("%d deliveries", others)))

	// At most one live item per subject, in the whole database.
	p = problems{}
	rows, err = conn.Query(ctx, `SELECT canonical_id, count(*) FROM work_items
		WHERE status IN ('pending', 'assigned', 'held') AND canonical_id IS NOT NULL
		GROUP BY canonical_id HAVING count(*) > 1`)
	if err != nil {
		return nil, fmt.Errorf("look for subjects with two live items: %w", err)
	}
	for rows.Next() {
		var subject string
		var n int
		if err := rows.Scan(&subject, &n); err != nil {
			return nil, fmt.Errorf("look for subjects with two live items: %w", err)
		}
		p.add("%s has %d live items", subject, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look for subjects with two live items: %w", err)
	}
	var live int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM work_items WHERE status IN ('pending', 'assigned', 'held')`).Scan(&live); err != nil {
		return nil, fmt.Errorf("count live items: %w", err)
	}
	checks = append(checks, p.check("no subject (canonical_id) has two live items (pending, assigned, held)",
		fmt.Sprintf("%d live items in the database", live)))

	// Replays answer replay and name the first answer's item.
	p = problems{}
	replays := 0
	for _, a := range answers {
		if a.role != roleReplay || !a.ok() {
			continue
		}
		replays++
		if a.resp.Outcome != webhook.OutcomeReplay || a.resp.EntryID != a.orig.resp.EntryID {
			p.add("%s answered %s %q, first answered %s %q", a.d.ID, a.resp.Outcome, a.resp.EntryID, a.orig.resp.Outcome, a.orig.resp.EntryID)
		}
	}
	checks = append(checks, p.check("every redelivery answered replay, naming the first answer's item",
		fmt.Sprintf("%d replays", replays)))

	// Collisions answer subject_collision and name the live item; unless
	// that item has finished (serve runs a worker), when enqueueing anew is
	// right.
	p = problems{}
	collisions, reenqueued := 0, 0
	var finishedCandidates []string
	for _, a := range answers {
		if a.role == roleCollide && a.ok() && a.resp.Outcome == webhook.OutcomeEnqueued {
			finishedCandidates = append(finishedCandidates, a.orig.resp.EntryID)
		}
	}
	status := map[string]string{}
	if len(finishedCandidates) > 0 {
		rows, err = conn.Query(ctx, `SELECT id::text, status FROM work_items WHERE id = ANY($1::uuid[])`, finishedCandidates)
		if err != nil {
			return nil, fmt.Errorf("read collided items: %w", err)
		}
		for rows.Next() {
			var id, st string
			if err := rows.Scan(&id, &st); err != nil {
				return nil, fmt.Errorf("read collided items: %w", err)
			}
			status[id] = st
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read collided items: %w", err)
		}
	}
	for _, a := range answers {
		if a.role != roleCollide || !a.ok() {
			continue
		}
		collisions++
		switch {
		case a.resp.Outcome == webhook.OutcomeSubjectCollision && a.resp.EntryID == a.orig.resp.EntryID:
		case a.resp.Outcome == webhook.OutcomeEnqueued && !isLive(status[a.orig.resp.EntryID]):
			reenqueued++
		default:
			p.add("%s (%s about %s) answered %s %q; the subject's item is %s", a.d.ID, a.d.Kind, a.orig.resp.QualifiedID,
				a.resp.Outcome, a.resp.EntryID, a.orig.resp.EntryID)
		}
	}
	detail := fmt.Sprintf("%d collisions", collisions)
	if reenqueued > 0 {
		detail += fmt.Sprintf(", %d of them enqueued anew after the subject's item finished", reenqueued)
	}
	checks = append(checks, p.check("every collision answered subject_collision, naming the subject's live item", detail))
	return checks, nil
}

// isLive reports whether an item status is pending, assigned or held.
func isLive(status string) bool {
	return status == "pending" || status == "assigned" || status == "held"
}
