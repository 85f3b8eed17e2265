package github_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
)

// TestRateLimitedInstallationWaitsOnEveryInstance: GitHub answers one
// call of an installation with its primary rate limit; the limiter records
// the deadline in PostgreSQL, so another instance's leases (another Store on
// another pool) pass that installation's items over while they lease
// another's, and lease them once the deadline has passed. The budget
// GitHub's headers gave is what the dashboard reads.
func TestRateLimitedInstallationWaitsOnEveryInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const other = 4343
	fake := githubtest.New(t)
	fake.AddRepo("octo", "widgets", repoID, "main", true)
	fake.AddInstallation(installation, repoName)
	pool := dbtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	here := queue.NewStore(pool, queue.Config{})
	inst, err := github.NewInstallations(github.Config{
		AppID: fake.AppID, PrivateKey: fake.PrivateKeyPEM, APIURL: fake.URL(),
		Budgets: github.NewBudgets(pool, here, logger),
	})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		for _, id := range []int64{installation, other} {
			d := queue.SubjectDispatch{
				Subject: &queue.SubjectRef{Kind: "github_issue", ID: fmt.Sprintf("%d/r#%d", id, n),
					Metadata: json.RawMessage(fmt.Sprintf(`{"installation_id":%d}`, id))},
				WorkflowRef: "coding", TriggerSource: "test", RequestedAt: queue.Timestamp{Time: time.Now()},
			}
			if _, err := here.Enqueue(ctx, queue.EnqueueParams{Dispatch: d, FromGitHub: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := inst.Token(ctx, installation); err != nil {
		t.Fatal(err)
	}
	fake.PrimaryRateLimit(1, 30*time.Minute)
	c, err := inst.Client(installation)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Repositories.Get(ctx, "octo", "widgets"); !isLimited(err) {
		t.Fatalf("call during the limit: %v, want a rate limit", err)
	}

	// Another instance, its own pool and a clock of its own.
	p2, err := pgxpool.NewWithConfig(ctx, pool.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p2.Close)
	var mu sync.Mutex
	now := time.Now()
	there := queue.NewStore(p2, queue.Config{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	lease := func() map[int64]int {
		t.Helper()
		res, err := there.Lease(ctx, queue.LeaseParams{Max: 5, OwnerID: "there", WorkflowIDs: []string{
			fmt.Sprint(now.UnixNano(), 1), fmt.Sprint(now.UnixNano(), 2), fmt.Sprint(now.UnixNano(), 3),
			fmt.Sprint(now.UnixNano(), 4), fmt.Sprint(now.UnixNano(), 5)}})
		if err != nil {
			t.Fatal(err)
		}
		by := map[int64]int{}
		for _, fe := range res.Leased {
			var m struct {
				Subject struct {
					Metadata struct {
						InstallationID int64 `json:"installation_id"`
					} `json:"metadata"`
				} `json:"subject"`
			}
			if err := json.Unmarshal(fe.Entry.SubjectDispatch, &m); err != nil {
				t.Fatal(err)
			}
			by[m.Subject.Metadata.InstallationID]++
		}
		return by
	}
	if got := lease(); len(got) != 1 || got[other] != 3 {
		t.Fatalf("lease during the limit took %v, want only installation %d's 3 items", got, other)
	}
	mu.Lock()
	now = now.Add(29 * time.Minute)
	mu.Unlock()
	if got := lease(); len(got) != 0 {
		t.Fatalf("lease before the reset took %v", got)
	}
	mu.Lock()
	now = now.Add(2*time.Minute + time.Second)
	mu.Unlock()
	if got := lease(); len(got) != 1 || got[installation] != 3 {
		t.Fatalf("lease after the reset took %v, want installation %d's 3 items", got, installation)
	}
	var remaining int
	var reason string
	if err := pool.QueryRow(ctx, `SELECT remaining, limited_reason FROM github_budgets WHERE installation_id = $1`, installation).Scan(&remaining, &reason); err != nil {
		t.Fatal(err)
	}
	if remaining != 0 || reason != "primary" {
		t.Fatalf("recorded budget remaining %d, reason %q; want 0, primary", remaining, reason)
	}
}
