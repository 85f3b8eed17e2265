package chaos_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/dbtest"
)

// TestKillServeUnderLoad kills `gitlease serve` with SIGKILL at random
// moments while unique issue deliveries arrive (most kills land while a
// delivery is being handled, a random few milliseconds into it, so some
// fall between the intake's commit and its answer), and restarts it on the
// same database each time (on a new port, which the load follows; a delivery
// that got no answer or a 5xx is redelivered, as GitHub does). Afterwards
// nothing may be lost or doubled: every delivery answered 2xx is recorded
// with its item; every item is completed exactly once, the ones a killed
// instance held recovered by the next instance's sweeper; and on GitHub
// every issue has exactly one branch, one draft pull request carrying the
// item's marker and one check run with the entry ID as external_id,
// concluded success, with one notice per recorded redelivery; no outbox row
// failed and no ref was ever moved.
func TestKillServeUnderLoad(t *testing.T) {
	t.Parallel()
	sc := chaosScale()
	rng, _ := chaosRand(t)
	gh := newGitHub(t, sc.killDeliveries)
	dsn := dbtest.URL(t)
	pool := openPool(t, dsn)
	bin := buildGitlease(t)
	dir := logDir(t)
	const ttl = 5 * time.Second
	env := serveEnv(dsn, gh, ttl)

	ds := make([]delivery, sc.killDeliveries)
	for i := range ds {
		ds[i] = issueDelivery(t, i+1)
	}

	var procs []*serveProc
	t.Cleanup(func() { logProblems(t, procs) })
	var url currentURL
	p := startServe(t, bin, env, dir, 0)
	procs = append(procs, p)
	url.Set(p.base)

	res := newLoadResult()
	snd := newSender(url.Get, 10*time.Second, 3*time.Minute, res)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	loadDone := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(loadDone)
		snd.run(ctx, ds, 4, sc.killPace, nil)
	}()

	stranded := map[int64]bool{} // outbox rows whose claim a kill left behind
	for k := 1; k <= sc.kills; k++ {
		gap := sc.killGapMin + time.Duration(rng.Int64N(int64(sc.killGapMax-sc.killGapMin)))
		time.Sleep(gap)
		// Most kills land while a delivery is in flight, so that some hit
		// the intake between its commit and its answer.
		inFlight := snd.waitInFlight(sc.killPace * 2)
		if inFlight { // somewhere in its handling, up to its commit and beyond
			time.Sleep(time.Duration(rng.Int64N(int64(15 * time.Millisecond))))
		}
		p.kill()
		killedAt := time.Since(start)
		// What the dead instance left behind: leases only the sweeper can
		// recover, outbox claims that must expire first.
		st, err := readQueueState(context.Background(), pool)
		loadRunning := "load running"
		select {
		case <-loadDone:
			loadRunning = "load finished"
		default:
		}
		t.Logf("kill %d at %s (serve %d up %s, %s, delivery in flight %v): %s (err %v)", k, killedAt.Round(time.Millisecond), p.n,
			gap.Round(time.Millisecond), loadRunning, inFlight, st, err)
		if claimed, err := claimedRows(context.Background(), pool); err == nil {
			var fresh []string
			for id, what := range claimed {
				if !stranded[id] {
					stranded[id] = true
					fresh = append(fresh, what)
				}
			}
			if len(fresh) > 0 {
				sort.Strings(fresh)
				t.Logf("kill %d stranded %d outbox claims: %s", k, len(fresh), strings.Join(fresh, "; "))
			}
		}
		p = startServe(t, bin, env, dir, k)
		procs = append(procs, p)
		url.Set(p.base)
	}
	<-loadDone
	t.Logf("load done after %s; %d kills", time.Since(start).Round(time.Millisecond), sc.kills)

	// Leases of killed instances expire after the TTL; outbox claims of a
	// killed sender after the sender's claim time (2 minutes).
	waitSettled(t, pool, gh, len(ds), 4*time.Minute)
	if err := p.terminate(time.Minute); err != nil {
		t.Errorf("the last serve on SIGTERM: %v, want exit 0", err)
	}
	t.Logf("total %s", time.Since(start).Round(time.Millisecond))

	checkIntake(t, pool, res, ds)
	checkCompleted(t, pool)
	checkGitHub(t, gh, mustItems(t, pool), replayNotices(t, pool))
}
