package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// sqlTracer counts the statements a pool sends and the wall time each takes
// from the client's side (-sqlstats). Each traced query is one round trip to
// the server; BEGIN and COMMIT are traced like any other statement.
type sqlTracer struct {
	mu    sync.Mutex
	stats map[string]*stmtStat
}

type stmtStat struct {
	sql   string
	calls int
	total time.Duration
}

type traceKey struct{}

type traceStart struct {
	sql   string
	start time.Time
}

func newSQLTracer() *sqlTracer { return &sqlTracer{stats: map[string]*stmtStat{}} }

// TraceQueryStart implements pgx.QueryTracer.
func (t *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{sql: d.SQL, start: time.Now()})
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *sqlTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if s, ok := ctx.Value(traceKey{}).(traceStart); ok {
		t.record(s.sql, time.Since(s.start))
	}
}

// TraceBatchStart implements pgx.BatchTracer: a batch is one round trip.
func (t *sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{sql: "(batch)", start: time.Now()})
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *sqlTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *sqlTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	if s, ok := ctx.Value(traceKey{}).(traceStart); ok {
		t.record(s.sql, time.Since(s.start))
	}
}

func (t *sqlTracer) record(sql string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stats[sql]
	if st == nil {
		st = &stmtStat{sql: sql}
		t.stats[sql] = st
	}
	st.calls++
	st.total += d
}

// take returns what was recorded since the last take and starts afresh.
func (t *sqlTracer) take() *phaseStats {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := &phaseStats{}
	for _, st := range t.stats {
		ps.stmts = append(ps.stmts, *st)
		ps.calls += st.calls
		ps.total += st.total
	}
	t.stats = map[string]*stmtStat{}
	slices.SortFunc(ps.stmts, func(a, b stmtStat) int { return int(b.total - a.total) })
	return ps
}

// phaseStats is what one system sent during one phase.
type phaseStats struct {
	stmts []stmtStat
	calls int
	total time.Duration
	plans []string // gitlease only: cached plans of its queries
}

// print writes round trips per job and the statements that took the most
// (summed) client-side time.
func (ps *phaseStats) print(w io.Writer, jobs int) {
	fmt.Fprintf(w, "    %d statements (round trips), %.2f per job, %s summed over connections\n",
		ps.calls, float64(ps.calls)/float64(jobs), ps.total.Round(time.Millisecond))
	for i, st := range ps.stmts {
		if i == 8 {
			break
		}
		fmt.Fprintf(w, "    %5.1f%% %7d calls %7.3f/job %8.0fµs avg  %s\n",
			100*float64(st.total)/float64(ps.total), st.calls, float64(st.calls)/float64(jobs),
			float64(st.total.Microseconds())/float64(st.calls), oneLine(st.sql, 90))
	}
	if len(ps.plans) > 0 {
		fmt.Fprintln(w, "    cached plans on the pool's connections after the phase:")
		for _, p := range ps.plans {
			fmt.Fprintf(w, "      %s\n", p)
		}
	}
}

// oneLine squeezes a statement onto one line of at most n characters.
func oneLine(sql string, n int) string {
	var b strings.Builder
	for _, line := range strings.Split(sql, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.Join(strings.Fields(line), " "))
	}
	s := b.String()
	if len(s) > n {
		s = s[:n-1] + "…"
	}
	return s
}
