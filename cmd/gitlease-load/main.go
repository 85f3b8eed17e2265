// Command gitlease-load measures gitlease's webhook intake under load and
// checks afterwards that nothing was lost or doubled.
//
// It sends signed, realistic GitHub deliveries (issues and pull requests
// opened, about 20 KB each, over many subjects, plus a share of
// redeliveries and of collisions with live subjects) to a running
// `gitlease serve`, prints throughput, latency percentiles and the answers
// by status and outcome, and with DATABASE_URL set checks serve's
// database. --baseline measures the durable-commit floor on the same
// database instead: one transaction per request inserting the same bytes
// into a plain table; --compare runs the floor, then the ideal receiver (this tool started again
// as a child: HMAC check and the same one-insert transaction, over HTTP, its
// CPU read from /proc), then gitlease, and prints gitlease's throughput as a
// share of the floor and its CPU per delivery against the ideal receiver's.
// It sends only to loopback addresses.
//
// Usage:
//
//	GITHUB_WEBHOOK_SECRET=S DATABASE_URL=URL gitlease-load \
//	    [--url http://127.0.0.1:8080/webhook] [--concurrency 16] \
//	    (--count N | --duration D) [--replay 0.05] [--collide 0.05] \
//	    [--rate R] [--seed N] [--pid PID] [--pg-waits] \
//	    [--baseline | --compare]
//
// The secret (the first of GITHUB_WEBHOOK_SECRET, as for `gitlease
// deliver`) and the database (DATABASE_URL) come from the environment,
// never from flags, so they do not show in ps. See docs/BENCHMARKS.md,
// "Ingest under load".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) == 2 && os.Args[1] == IdealFlag {
		if err := serveIdeal(ctx, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "gitlease-load ideal receiver: %v\n", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the tool and returns the exit status: 0 when
// everything ran and every check passed, 1 when a check failed or the run
// could not be carried out, 2 for bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "gitlease-load: %v\n", err)
		return 2
	}
	if err := opts.validate(); err != nil {
		fmt.Fprintf(stderr, "gitlease-load: %v\n", err)
		return 2
	}
	if _, err := Run(ctx, opts, stdout); err != nil {
		if !errors.Is(err, ErrCheckFailed) {
			fmt.Fprintf(stderr, "gitlease-load: %v\n", err)
		}
		return 1
	}
	return 0
}

// parseFlags reads the options from args, and the secret and the database
// from the environment.
func parseFlags(args []string, stderr io.Writer) (Options, error) {
	fs := flag.NewFlagSet("gitlease-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret, _, _ := strings.Cut(os.Getenv("GITHUB_WEBHOOK_SECRET"), ",")
	o := Options{Secret: strings.TrimSpace(secret), DSN: os.Getenv("DATABASE_URL")}
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080/webhook", "serve's webhook URL (loopback hosts only)")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "requests in flight at once (workers; baseline: connections)")
	fs.IntVar(&o.Count, "count", 0, "requests to send (replays and collisions included); with --duration, whichever comes first")
	fs.DurationVar(&o.Duration, "duration", 0, "how long to send, e.g. 30s; with --count, whichever comes first")
	fs.Float64Var(&o.Replay, "replay", 0, "share of requests that resend an earlier delivery (same ID and body), e.g. 0.05")
	fs.Float64Var(&o.Collide, "collide", 0, "share of requests that are a new delivery about a subject with a live item, e.g. 0.05")
	fs.Float64Var(&o.Rate, "rate", 0, "cap on requests per second over all workers (0: as fast as possible)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for the mix of requests and the body text (delivery IDs and the run's repositories are random regardless)")
	fs.BoolVar(&o.Baseline, "baseline", false, "measure only the durable-commit floor on DATABASE_URL: one INSERT transaction per request, no HTTP")
	fs.BoolVar(&o.Compare, "compare", false, "run the baseline, then the HTTP load, and print gitlease's throughput as a share of the floor")
	fs.IntVar(&o.PID, "pid", 0, "serve's process ID: report its resident memory (sampled every 500ms) and CPU time under the load")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "timeout of one request")
	fs.IntVar(&o.Repos, "repos", 16, "repositories the subjects are spread over")
	fs.BoolVar(&o.PGWaits, "pg-waits", false, "sample pg_stat_activity on DATABASE_URL every 10ms and report where the database's backends spent the run")
	fs.IntVar(&o.BodySize, "body-size", DefaultBodySize, "bytes issue and pull request deliveries are padded to (description text)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}
