package chaos_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/db/dbtest"
)

// faultRun is one run of TestGitHubFaults' workload.
type faultRun struct {
	states  map[string]subjectState
	settled time.Duration
}

// runFaultWorkload runs the workload on a fresh database and fake GitHub:
// issues 1..issues opened, then pull requests opened on branches of their
// own, then every third issue and every second pull request redelivered
// once. With faulty, the fake fails 30% of all calls (500, 502, 503 or a
// secondary rate limit, before any effect), starts with a burst of
// secondary rate limits and, a few seconds in, exhausts the primary rate
// limit for a while. It returns the final state once everything settled.
func runFaultWorkload(t *testing.T, bin string, sc scale, faulty bool, seed uint64) faultRun {
	issues, pulls := sc.faultIssues, sc.faultPulls
	gh := newGitHub(t, issues)
	var ds, replays []delivery
	for n := 1; n <= issues; n++ {
		d := issueDelivery(t, n)
		ds = append(ds, d)
		if n%3 == 0 {
			replays = append(replays, d)
		}
	}
	for j := 1; j <= pulls; j++ {
		branch := fmt.Sprintf("chaos-pr-%d", j)
		sha := gh.Push(repoFull, branch, fmt.Sprintf("work for pull request %d", j))
		pr := gh.AddPullRequest(repoFull, branch, "main", fmt.Sprintf("Chaos pull request %d", j), "Some work.", false)
		d := pullDelivery(t, pr.Number, branch, sha)
		ds = append(ds, d)
		if j%2 == 0 {
			replays = append(replays, d)
		}
	}
	if faulty {
		gh.FailRate(0.3, int64(seed))
		gh.SecondaryRateLimit(githubtest.AnyKind, 3, 1)
	}
	dsn := dbtest.URL(t)
	pool := openPool(t, dsn)
	p := startServe(t, bin, serveEnv(dsn, gh, 10*time.Second), logDir(t), 0)
	t.Cleanup(func() { logProblems(t, []*serveProc{p}) })

	res := newLoadResult()
	snd := newSender(func() string { return p.base }, 10*time.Second, time.Minute, res)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if faulty {
		// An 8 s window: the limiter holds a credential after each secondary
		// limit and token minting waits on the App's own, so a short run can
		// make no installation call for a few seconds, and a narrower
		// window would then refuse nothing.
		time.AfterFunc(2*time.Second, func() { gh.PrimaryRateLimit(20, 8*time.Second) })
	}
	snd.run(ctx, ds, 4, 50*time.Millisecond, nil)
	snd.run(ctx, replays, 2, 50*time.Millisecond, nil)

	tally := func() map[string]int {
		faults := map[string]int{}
		for _, r := range gh.Requests() {
			if r.Fault != "" {
				faults[r.Fault]++
			}
		}
		return faults
	}
	t.Cleanup(func() {
		faults := tally()
		t.Logf("GitHub answered %d requests, %d of them with an injected fault: %v",
			gh.Count(githubtest.AnyKind), sumValues(faults), faults)
	})
	took := waitSettled(t, pool, gh, len(ds), sc.faultSettle)
	t.Logf("settled %s after the load started", time.Since(start).Round(100*time.Millisecond))
	if faults := tally(); faulty && (faults["secondary_rate_limit"] == 0 || faults["primary_rate_limit"] == 0 || sumValues(faults) < 10) {
		t.Errorf("faults injected %v: want 500s, 502s, 503s, secondary and primary rate limits", faults)
	}
	if err := p.terminate(time.Minute); err != nil {
		t.Errorf("serve on SIGTERM: %v, want exit 0", err)
	}

	checkIntake(t, pool, res, ds)
	checkCompleted(t, pool)
	states := checkGitHub(t, gh, mustItems(t, pool), replayNotices(t, pool))
	// The workload's own expectation, whatever GitHub did.
	for _, d := range ds {
		want := subjectState{Items: 1, Status: "completed", CheckRuns: 1, Conclusion: "success"}
		if !d.Pull {
			want.Branches, want.PullRequests = 1, 1
		}
		for _, r := range replays {
			if r.ID == d.ID {
				want.Notices = 1
			}
		}
		if got := states[d.QualifiedID()]; got != want {
			t.Errorf("%s ended as %+v, want %+v", d.QualifiedID(), got, want)
		}
	}
	return faultRun{states: states, settled: took}
}

// sumValues adds up m's values.
func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestGitHubFaults runs one workload (issues and pull requests opened, some
// redelivered) twice, side by side: against a healthy fake GitHub, and
// against one that fails 30% of calls and rate-limits (secondary and
// primary limits). The final state must be the same, subject by subject:
// one completed item, one branch and one draft pull request per issue, one
// check run per item concluded success, one notice per redelivery, and
// nothing failed or doubled.
func TestGitHubFaults(t *testing.T) {
	t.Parallel()
	sc := chaosScale()
	_, seed := chaosRand(t)
	bin := buildGitlease(t)

	var mu sync.Mutex
	runs := map[string]faultRun{}
	t.Run("runs", func(t *testing.T) {
		for _, faulty := range []bool{false, true} {
			name := "healthy"
			if faulty {
				name = "faulty"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := runFaultWorkload(t, bin, sc, faulty, seed)
				mu.Lock()
				runs[name] = r
				mu.Unlock()
			})
		}
	})
	healthy, ok1 := runs["healthy"]
	faulty, ok2 := runs["faulty"]
	if !ok1 || !ok2 {
		t.Fatal("a run did not finish")
	}
	t.Logf("settled: healthy in %s, faulty in %s", healthy.settled.Round(100*time.Millisecond), faulty.settled.Round(100*time.Millisecond))
	if !reflect.DeepEqual(healthy.states, faulty.states) {
		var subjects []string
		for s := range healthy.states {
			subjects = append(subjects, s)
		}
		for s := range faulty.states {
			if _, ok := healthy.states[s]; !ok {
				subjects = append(subjects, s)
			}
		}
		sort.Strings(subjects)
		for _, s := range subjects {
			if h, f := healthy.states[s], faulty.states[s]; h != f {
				t.Errorf("%s: healthy run %+v, faulty run %+v", s, h, f)
			}
		}
	}
}
