package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitInterval is how often --pg-waits samples pg_stat_activity.
const waitInterval = 10 * time.Millisecond

// WaitProfile is where the database's client backends (other than the
// tool's own) spent a run, from pg_stat_activity sampled every
// waitInterval: idle outside a transaction, idle inside one (waiting for
// the client's next statement: the round trip), or active, on CPU or
// waiting for an event such as IO/WALSync (the commit's flush).
type WaitProfile struct {
	Samples int
	// Backends counts, per state, backend-samples in it.
	Backends map[string]int
	// CPU is the user+system CPU time the sampled backends used between
	// the first and the last time they were seen (read from /proc, so only
	// when PostgreSQL runs on this machine and the tool may read its
	// processes; 0 otherwise).
	CPU time.Duration
	// Elapsed is the wall time the sampling covered.
	Elapsed time.Duration
}

// Print writes the states by share of backend-samples, largest first.
func (w *WaitProfile) Print(out io.Writer, name string) {
	total := 0
	for _, n := range w.Backends {
		total += n
	}
	if w.Samples == 0 || total == 0 {
		fmt.Fprintf(out, "%s: PostgreSQL wait profile: no samples\n", name)
		return
	}
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range w.Backends {
		all = append(all, kv{k, n})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.k, b.k)) })
	fmt.Fprintf(out, "%s: PostgreSQL backends of the database, %d samples every %s (%.1f backends on average):\n",
		name, w.Samples, waitInterval, float64(total)/float64(w.Samples))
	for _, e := range all {
		fmt.Fprintf(out, "  %5.1f%%  %s\n", 100*float64(e.n)/float64(total), e.k)
	}
	if w.CPU > 0 && w.Elapsed > 0 {
		fmt.Fprintf(out, "%s: PostgreSQL backends of the database: CPU %.1fs user+system in %.1fs (%.2f cores on average)\n",
			name, w.CPU.Seconds(), w.Elapsed.Seconds(), w.CPU.Seconds()/w.Elapsed.Seconds())
	}
}

// waitSampler samples pg_stat_activity until stopped.
type waitSampler struct {
	cancel   context.CancelFunc
	done     sync.WaitGroup
	start    time.Time
	prof     WaitProfile
	firstCPU map[int32]time.Duration // backend pid -> CPU when first seen
	err      error
}

// startWaitSampler connects to dsn and samples its database's client
// backends every waitInterval.
func startWaitSampler(ctx context.Context, dsn string) (*waitSampler, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("--pg-waits: connect: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &waitSampler{cancel: cancel, start: time.Now(), prof: WaitProfile{Backends: map[string]int{}}, firstCPU: map[int32]time.Duration{}}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		defer conn.Close(context.WithoutCancel(ctx))
		t := time.NewTicker(waitInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.sample(ctx, conn); err != nil {
				if ctx.Err() == nil {
					s.err = err
				}
				return
			}
		}
	}()
	return s, nil
}

// sample reads the state of every client backend of the database once.
func (s *waitSampler) sample(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT pid, CASE
			WHEN state = 'idle' THEN 'idle (no transaction)'
			WHEN state LIKE 'idle in transaction%' THEN 'idle in transaction (waiting for the client''s next statement)'
			WHEN wait_event IS NULL THEN 'active: on CPU'
			ELSE 'active: waiting for ' || wait_event_type || '/' || wait_event END
		FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
		pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return fmt.Errorf("sample pg_stat_activity: %w", err)
	}
	type backend struct {
		PID   int32
		State string
	}
	backends, err := pgx.CollectRows(rows, pgx.RowToStructByPos[backend])
	if err != nil {
		return fmt.Errorf("sample pg_stat_activity: %w", err)
	}
	s.prof.Samples++
	for _, b := range backends {
		s.prof.Backends[b.State]++
		if _, seen := s.firstCPU[b.PID]; !seen {
			cpu, err := readCPU(int(b.PID))
			if err != nil {
				cpu = -1 // not readable: not counted
			}
			s.firstCPU[b.PID] = cpu
		}
	}
	return nil
}

// Stop ends the sampling and returns the profile.
func (s *waitSampler) Stop() (WaitProfile, error) {
	s.cancel()
	s.done.Wait()
	s.prof.Elapsed = time.Since(s.start)
	for pid, first := range s.firstCPU {
		if first < 0 {
			continue
		}
		if now, err := readCPU(int(pid)); err == nil && now > first {
			s.prof.CPU += now - first
		}
	}
	return s.prof, s.err
}
