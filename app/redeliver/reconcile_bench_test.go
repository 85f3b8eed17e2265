package redeliver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/redeliver"
	"github.com/gitlease/gitlease/db/dbtest"
)

// BenchmarkReconcilerScan scans a full 3-day delivery log of 10,000
// attempts (spread evenly over 72 hours) against the fake GitHub and real
// Postgres, and reports the GitHub calls each scan costs:
//   - first: the first scan (no high-water mark), every attempt delivered;
//   - first_1pct_missed: the same with 100 deliveries missed, each requested;
//   - steady: a later scan, back to the high-water mark less the overlap.
//
// See docs/BENCHMARKS.md.
func BenchmarkReconcilerScan(b *testing.B) {
	const attempts = 10000
	for _, bc := range []struct {
		name   string
		missed int
		steady bool
	}{{"first", 0, false}, {"first_1pct_missed", 100, false}, {"steady", 0, true}} {
		b.Run(bc.name, func(b *testing.B) {
			pool := dbtest.New(b)
			var calls int
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				gh := githubtest.New(b)
				now := time.Now()
				gh.SetHookClock(func() time.Time { return now })
				step := (redeliver.MaxRedeliverLookback - time.Minute) / attempts
				for j := 0; j < attempts; j++ {
					a := githubtest.HookAttempt{GUID: fmt.Sprintf("bench-%d-%d", i, j), Event: "issues", Action: "opened",
						DeliveredAt: now.Add(-redeliver.MaxRedeliverLookback + time.Minute + time.Duration(j)*step),
						Status:      "OK", StatusCode: 202}
					if j%(attempts/max(bc.missed, 1)) == 0 && bc.missed > 0 {
						a.Status, a.StatusCode = "failed to connect", 0
					}
					gh.AddHookAttempt(a, []byte(`{"action":"opened"}`))
				}
				if _, err := pool.Exec(context.Background(), `TRUNCATE redeliveries, redelivery_scans`); err != nil {
					b.Fatal(err)
				}
				inst, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
				if err != nil {
					b.Fatal(err)
				}
				r, err := redeliver.NewReconciler(pool, inst, redeliver.ReconcilerConfig{}, nil)
				if err != nil {
					b.Fatal(err)
				}
				if bc.steady {
					if _, err := r.Scan(context.Background(), redeliver.ScanOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				before := gh.Count(githubtest.AnyKind)
				b.StartTimer()
				rep, err := r.Scan(context.Background(), redeliver.ScanOptions{})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if !bc.steady && (rep.Attempts != attempts || rep.Count(redeliver.ResultRequested) != bc.missed) {
					b.Fatalf("scan saw %d attempts, requested %d; want %d, %d", rep.Attempts, rep.Count(redeliver.ResultRequested), attempts, bc.missed)
				}
				calls += gh.Count(githubtest.AnyKind) - before
				gh.WaitRedeliveries()
				gh.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(calls)/float64(b.N), "github_calls/op")
		})
	}
}
