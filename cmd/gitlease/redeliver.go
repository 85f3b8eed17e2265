package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/redeliver"
	"github.com/gitlease/gitlease/app/service"
)

// reconcilerService is serve's member that runs rec's scan every
// GITLEASE_REDELIVER_INTERVAL in the background (docs/webhook.md). Without
// a reconciler (no GitHub App credentials), or with the interval 0, it
// starts nothing.
func reconcilerService(cfg config, rec *redeliver.Reconciler, logger *slog.Logger) service.Member {
	if rec == nil || cfg.RedeliverInterval == 0 {
		if rec != nil {
			logger.Warn("GITLEASE_REDELIVER_INTERVAL is 0: webhook deliveries GitHub failed to deliver are not redelivered")
		}
		return service.Member{Name: "redelivery reconciler"}
	}
	return service.Of("redelivery reconciler", &service.Periodic{Name: "redelivery scan", Interval: cfg.RedeliverInterval, Run: rec.Run, Logger: logger})
}

func newReconciler(cfg config, pool *pgxpool.Pool, gh *github.Installations, metrics redeliver.RedeliveryMetrics, logger *slog.Logger) (*redeliver.Reconciler, error) {
	rec, err := redeliver.NewReconciler(pool, gh, redeliver.ReconcilerConfig{
		Lookback: cfg.RedeliverLookback, LogRetention: cfg.deliveryLogRetention(), LabelTrigger: cfg.TriggerLabel != "", Metrics: metrics,
	}, logger)
	if err != nil {
		return nil, &configError{Setting: "GITLEASE_REDELIVER_LOOKBACK", Problem: err.Error()}
	}
	return rec, nil
}

// runRedeliver is `gitlease redeliver`: one reconciler scan, printed as a
// table of what it found and did.
func runRedeliver(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("gitlease redeliver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	since := fs.Duration("since", 24*time.Hour, "how far back to scan GitHub's delivery log (at most 72h; 168h on GitHub Enterprise Server)")
	guid := fs.String("guid", "", "consider just this delivery (its X-GitHub-Delivery)")
	dryRun := fs.Bool("dry-run", false, "list what would be redelivered; request and record nothing")
	includeRejected := fs.Bool("include-rejected", false, "also redeliver deliveries gitlease refused as bad input (400, 401, 409, 413), e.g. after fixing a secret")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return &configError{Setting: "flags", Problem: err.Error()}
	}
	cfg, err := loadConfig("redeliver", nil, false, stderr, "DATABASE_URL")
	if err != nil {
		return err
	}
	if logRetention := cfg.deliveryLogRetention(); *since <= 0 || *since > logRetention {
		return &configError{Setting: "--since", Problem: fmt.Sprintf("%s is not a duration from 1ns to %s (how long GitHub keeps deliveries)", *since, logRetention)}
	}
	gh, err := githubFromConfig(cfg, nil, nil, logger)
	if err != nil {
		return err
	}
	if gh == nil {
		return &configError{Setting: "GITHUB_APP_ID", Problem: "redeliver reads GitHub's delivery log as the App: set GITHUB_APP_ID and GITHUB_PRIVATE_KEY"}
	}
	pool, _, err := openMigrated(ctx, cfg.DatabaseURL, cfg.Migrate, false, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	rec, err := newReconciler(cfg, pool, gh, nil, logger)
	if err != nil {
		return err
	}
	rep, err := rec.Scan(ctx, redeliver.ScanOptions{Since: *since, GUID: *guid, DryRun: *dryRun, IncludeRejected: *includeRejected, Wait: true})
	printReport(stdout, rep, *dryRun)
	if *guid != "" && len(rep.Findings) == 0 && err == nil {
		fmt.Fprintf(stdout, "delivery %s has no failed attempt in the log since %s: it succeeded, or is older (see --since)\n", *guid, rep.From.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return fmt.Errorf("redelivery scan: %w", err)
	}
	return nil
}

// printReport writes the scan's findings as a table and a summary line.
func printReport(w io.Writer, rep redeliver.Report, dryRun bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GUID\tEVENT\tACTION\tLAST ATTEMPT\tSTATUS\tATTEMPTS\tREQUESTS\tOUTCOME\tDETAIL")
	for _, f := range rep.Findings {
		status := strconv.Itoa(f.StatusCode)
		if f.StatusCode == 0 {
			status = "0 (" + f.Status + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", f.GUID, f.Event, orDash(f.Action),
			f.DeliveredAt.UTC().Format(time.RFC3339), status, f.Attempts, f.Requests, f.Outcome, orDash(f.Detail))
	}
	_ = tw.Flush()
	mode := ""
	if dryRun {
		mode = " (dry run: nothing requested)"
	}
	fmt.Fprintf(w, "scanned %d attempts of %d deliveries since %s in %d pages; %d without a successful attempt: %d requested, %d recorded by gitlease, %d rejected as bad input, %d irrelevant%s\n",
		rep.Attempts, rep.GUIDs, rep.From.UTC().Format(time.RFC3339), rep.Pages, len(rep.Findings),
		rep.Count(redeliver.ResultRequested)+rep.Count(redeliver.OutcomeWouldRequest), rep.Count(redeliver.OutcomeRecorded),
		rep.Count(redeliver.ResultRejectedSkipped), rep.Count(redeliver.OutcomeIrrelevant), mode)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
