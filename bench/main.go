// Package main, the queuebench command, compares gitlease's durable queue
// with River (github.com/riverqueue/river, riverpgxv5 driver, unique jobs) on the same
// PostgreSQL server in one run:
//
//   - unique enqueue: N jobs, each with its own uniqueness key, inserted from
//     C goroutines (gitlease Store.Enqueue with an IdempotencyKey and a
//     distinct subject; River Client.Insert with UniqueOpts{ByArgs: true});
//   - drain: the N jobs just enqueued (insertion not timed) are worked to
//     completion by W concurrent workers that do nothing (gitlease: W
//     goroutines looping Lease(max=5) + Complete; River: a client with
//     MaxWorkers W and a no-op worker).
//
// Each system gets its own freshly created database on the server named by
// -dsn; both are dropped at the end. See README.md.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

type options struct {
	dsn         string
	n           int
	concurrency int
	workers     int
	rounds      int
	only        string
	leaseMax    int
	cpuprofile  string
	sqlStats    bool
	autoExplain time.Duration
	whatIf      map[string]bool
	keep        bool
	riverFetch  fetchConfig
}

// fetchConfig is River's fetch tuning, applied to its one queue.
type fetchConfig struct {
	cooldown time.Duration
	poll     time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.dsn, "dsn", envOr("QUEUEBENCH_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"PostgreSQL URL of a role that may CREATE and DROP databases; the benchmark databases are created on the same server ($QUEUEBENCH_DSN)")
	flag.IntVar(&o.n, "n", 10_000, "jobs per phase")
	flag.IntVar(&o.concurrency, "concurrency", 16, "goroutines enqueueing concurrently")
	flag.IntVar(&o.workers, "workers", 5, "concurrent workers draining the queue")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each round runs every phase on both systems (order alternating) and the median is reported")
	flag.StringVar(&o.only, "only", "both", "which system to run: both, gitlease or river (with -cpuprofile, to profile one side alone)")
	flag.IntVar(&o.leaseMax, "lease-max", 5, "gitlease Lease max per call (1..5)")
	flag.DurationVar(&o.riverFetch.cooldown, "river-fetch-cooldown", time.Millisecond, "River QueueConfig.FetchCooldown (River's default is 100ms; minimum 1ms)")
	flag.DurationVar(&o.riverFetch.poll, "river-fetch-poll", 10*time.Millisecond, "River QueueConfig.FetchPollInterval (River's default is 1s; minimum 1ms)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a Go CPU profile of the whole run to this file")
	flag.BoolVar(&o.sqlStats, "sqlstats", false, "trace every statement each system sends and print, per phase, round trips per job and the statements that take the most time")
	flag.DurationVar(&o.autoExplain, "auto-explain", 0, "diagnostics: log the plan of every statement slower than this to the server log (auto_explain, set on the benchmark databases only); 0 is off")
	whatIf := flag.String("gitlease-whatif", "", "diagnostics, not gitlease as shipped: comma-separated changes to gitlease's benchmark database that show what a fix in queue/ or db/ would gain: "+
		"no-notify (disable the work_items_pending_notify trigger), custom-plans (plan_cache_mode=force_custom_plan on gitlease's connections), "+
		"analyze (ANALYZE work_items, untimed, before the drain and reconnect, so the drain plans with statistics), "+
		"enqueue-1stmt (instead of Store.Enqueue, one autocommit INSERT of the same row with its generation upsert in a CTE: the floor for gitlease's schema, without replay or collision handling)")
	flag.BoolVar(&o.keep, "keep", false, "do not drop the benchmark databases at the end")
	flag.Parse()
	o.whatIf = map[string]bool{}
	for _, w := range strings.Split(*whatIf, ",") {
		switch w = strings.TrimSpace(w); w {
		case "":
		case "no-notify", "custom-plans", "analyze", "enqueue-1stmt":
			o.whatIf[w] = true
		default:
			log.Fatalf("-gitlease-whatif: unknown change %q", w)
		}
	}
	if o.n < 1 || o.concurrency < 1 || o.workers < 1 || o.rounds < 1 || o.leaseMax < 1 || o.leaseMax > 5 {
		log.Fatal("-n, -concurrency, -workers and -rounds must be positive; -lease-max 1..5")
	}
	switch o.only {
	case "both", "gitlease", "river":
	default:
		log.Fatalf("-only must be both, gitlease or river, not %q", o.only)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// result is one system's figures for one phase of one round.
type result struct {
	jobs    int
	elapsed time.Duration
	stats   *phaseStats // nil unless -sqlstats
}

func (r result) rate() float64 { return float64(r.jobs) / r.elapsed.Seconds() }

// phase names, in report order.
const (
	phaseEnqueue = "unique enqueue"
	phaseDrain   = "drain"
)

type system interface {
	name() string
	// reset empties the system's tables between rounds.
	reset(ctx context.Context) error
	enqueue(ctx context.Context, round int) (result, error)
	drain(ctx context.Context, round int) (result, error)
	close()
}

func run(ctx context.Context, o options, out io.Writer) (err error) {
	admin, err := pgx.Connect(ctx, o.dsn)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(o.dsn), err)
	}
	defer admin.Close(context.Background())

	facts, err := readFacts(ctx, admin)
	if err != nil {
		return err
	}

	suffix := randomSuffix()
	var systems []system
	var dbs []string
	defer func() {
		for _, s := range systems {
			s.close()
		}
		if o.keep {
			fmt.Fprintf(os.Stderr, "kept databases %s\n", strings.Join(dbs, ", "))
			return
		}
		for _, name := range dbs {
			// A fresh context: the run's may have been cancelled by ^C.
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, derr := admin.Exec(dctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); derr != nil {
				err = errors.Join(err, fmt.Errorf("drop database %s: %w", name, derr))
			}
			cancel()
		}
	}()
	newDB := func(prefix string) (*pgxpool.Config, error) {
		name := prefix + "_bench_" + suffix
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return nil, fmt.Errorf("create database %s: %w", name, err)
		}
		dbs = append(dbs, name)
		if o.autoExplain > 0 {
			ident := pgx.Identifier{name}.Sanitize()
			for _, set := range []string{
				"session_preload_libraries = 'auto_explain'",
				fmt.Sprintf("auto_explain.log_min_duration = '%dus'", o.autoExplain.Microseconds()),
			} {
				if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" SET "+set); err != nil {
					return nil, fmt.Errorf("enable auto_explain on %s: %w", name, err)
				}
			}
		}
		cfg, err := pgxpool.ParseConfig(o.dsn)
		if err != nil {
			return nil, fmt.Errorf("parse -dsn: %w", err)
		}
		cfg.ConnConfig.Database = name
		// Both systems get the same pool: room for every enqueuer plus the
		// connections River keeps for itself (LISTEN, leader election,
		// completer), and pgx's default statement cache.
		cfg.MaxConns = int32(max(o.concurrency, o.workers) + 4)
		cfg.MinConns = 0
		return cfg, nil
	}

	if o.only != "river" {
		cfg, err := newDB("gitlease")
		if err != nil {
			return err
		}
		g, err := newGitlease(ctx, cfg, o)
		if err != nil {
			return err
		}
		systems = append(systems, g)
	}
	if o.only != "gitlease" {
		cfg, err := newDB("river")
		if err != nil {
			return err
		}
		r, err := newRiver(ctx, cfg, o)
		if err != nil {
			return err
		}
		systems = append(systems, r)
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	fmt.Fprintf(out, "queuebench: gitlease vs River %s  (n=%d, concurrency=%d, workers=%d, rounds=%d)\n",
		riverVersion(), o.n, o.concurrency, o.workers, o.rounds)
	if len(o.whatIf) > 0 {
		fmt.Fprintf(out, "WHAT-IF RUN, not gitlease as shipped: %s\n", strings.Join(slices.Sorted(maps.Keys(o.whatIf)), ", "))
	}
	facts.print(out)
	fmt.Fprintln(out)

	// results[system][phase] holds one result per round.
	results := map[string]map[string][]result{}
	for _, s := range systems {
		results[s.name()] = map[string][]result{}
	}
	started := time.Now()
	for round := 1; round <= o.rounds; round++ {
		order := slices.Clone(systems)
		if round%2 == 0 {
			slices.Reverse(order) // alternate who goes first
		}
		for _, s := range order {
			if err := s.reset(ctx); err != nil {
				return fmt.Errorf("%s: reset: %w", s.name(), err)
			}
		}
		for _, phase := range []string{phaseEnqueue, phaseDrain} {
			for _, s := range order {
				// Start every timed phase from a clean checkpoint, so that
				// neither side pays for the other's dirty buffers.
				if _, err := admin.Exec(ctx, "CHECKPOINT"); err != nil {
					return fmt.Errorf("checkpoint: %w", err)
				}
				var r result
				var err error
				if phase == phaseEnqueue {
					r, err = s.enqueue(ctx, round)
				} else {
					r, err = s.drain(ctx, round)
				}
				if err != nil {
					return fmt.Errorf("%s: round %d: %s: %w", s.name(), round, phase, err)
				}
				results[s.name()][phase] = append(results[s.name()][phase], r)
				fmt.Fprintf(out, "round %d  %-9s %-15s %6d jobs in %8.3fs  %9.0f jobs/s\n",
					round, s.name(), phase, r.jobs, r.elapsed.Seconds(), r.rate())
				if r.stats != nil {
					r.stats.print(out, r.jobs)
				}
			}
		}
	}
	fmt.Fprintf(out, "(all rounds took %s; load average now %s)\n\n", time.Since(started).Round(time.Millisecond), loadAvg())
	printSummary(out, o, systems, results)
	return nil
}

// printSummary prints the median of the rounds per system and phase and the
// ratio gitlease/River.
func printSummary(out io.Writer, o options, systems []system, results map[string]map[string][]result) {
	drainLabel := fmt.Sprintf("drain, %d workers", o.workers)
	label := map[string]string{phaseEnqueue: fmt.Sprintf("unique enqueue, c=%d", o.concurrency), phaseDrain: drainLabel}
	fmt.Fprintf(out, "median of %d round(s), n=%d jobs per phase\n", o.rounds, o.n)
	fmt.Fprintf(out, "| %-24s | %15s | %13s | %14s |\n", "phase", "gitlease jobs/s", "River jobs/s", "gitlease/River")
	fmt.Fprintf(out, "|%s|%s|%s|%s|\n", strings.Repeat("-", 26), strings.Repeat("-", 17), strings.Repeat("-", 15), strings.Repeat("-", 16))
	for _, phase := range []string{phaseEnqueue, phaseDrain} {
		g := medianRate(results["gitlease"][phase])
		r := medianRate(results["river"][phase])
		ratio := "-"
		if g > 0 && r > 0 {
			ratio = fmt.Sprintf("%.2f", g/r)
		}
		fmt.Fprintf(out, "| %-24s | %15s | %13s | %14s |\n", label[phase], fmtRate(g), fmtRate(r), ratio)
	}
}

func medianRate(rs []result) float64 {
	if len(rs) == 0 {
		return 0
	}
	rates := make([]float64, len(rs))
	for i, r := range rs {
		rates[i] = r.rate()
	}
	slices.Sort(rates)
	if len(rates)%2 == 1 {
		return rates[len(rates)/2]
	}
	return (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
}

func fmtRate(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", r)
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// redact hides a password in a connection URL for error messages.
func redact(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "(unparseable -dsn)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
