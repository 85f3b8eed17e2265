package chaos_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/pgcluster"
)

// startCluster starts a throwaway PostgreSQL cluster the test owns, so it
// can stop and start it (see pgcluster.StartTemp: as the postgres OS user
// when run as root), and registers its removal with t.Cleanup.
func startCluster(t *testing.T) *pgcluster.Cluster {
	t.Helper()
	c, err := pgcluster.StartTemp(context.Background(), nil, "", pgcluster.Config{
		BinDir:         os.Getenv("GITLEASE_PG_BINDIR"),
		MaxConnections: 100,
	})
	if err != nil {
		t.Fatalf("TestPostgresRestartUnderLoad needs a PostgreSQL cluster of its own to stop and start "+
			"(install PostgreSQL or set GITLEASE_PG_BINDIR): %v", err)
	}
	t.Cleanup(func() {
		if err := c.Remove(context.Background()); err != nil {
			t.Logf("remove the test's cluster: %v", err)
		}
	})
	t.Logf("PostgreSQL cluster in %s on port %d", c.Dir(), c.Port())
	return c
}

// TestPostgresRestartUnderLoad runs `gitlease serve` on a PostgreSQL
// cluster the test owns and, under a light stream of issue deliveries
// (redelivered after a 5xx, as GitHub does), stops the cluster (pg_ctl stop
// -m fast) and starts it again, without touching serve. While it is down
// every webhook delivery must be answered 503 and /readyz 503, each within
// 5 s (an answer that does not come is a hang); once it is back, /readyz
// must return 200 and deliveries 2xx again, and in the end every delivery
// answered 2xx is recorded with its item, and every item is completed with
// its branch, pull request and check run on GitHub: nothing lost.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	sc := chaosScale()
	c := startCluster(t)
	dsn := c.URL("postgres")
	// Enough numbered issues for the whole run; only those sent count.
	total := int((time.Duration(sc.pgOutages)*(sc.pgDown+30*time.Second) + 30*time.Second) / sc.pgPace)
	gh := newGitHub(t, total)
	bin := buildGitlease(t)
	dir := logDir(t)
	env := serveEnv(dsn, gh, 5*time.Second)
	p := startServe(t, bin, env, dir, 0)
	t.Cleanup(func() { logProblems(t, []*serveProc{p}) })
	waitReady(t, p.base, 30*time.Second)

	ds := make([]delivery, total)
	for i := range ds {
		ds[i] = issueDelivery(t, i+1)
	}
	res := newLoadResult()
	snd := newSender(func() string { return p.base }, 5*time.Second, 3*time.Minute, res)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stopFeeding := make(chan struct{})
	loadDone := make(chan []delivery, 1)
	go func() { loadDone <- snd.run(ctx, ds, 4, sc.pgPace, stopFeeding) }()

	probe := &http.Client{Timeout: 5 * time.Second}
	for o := 1; o <= sc.pgOutages; o++ {
		time.Sleep(2 * time.Second) // the load flows
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		down := time.Now()
		readyz := map[string]int{}
		for time.Since(down) < sc.pgDown {
			status, err := getStatus(probe, p.base+"/readyz")
			switch {
			case err != nil:
				readyz["no answer"]++
				t.Errorf("outage %d: GET /readyz got no answer within 5 s while Postgres was down: %v", o, err)
			case status != http.StatusServiceUnavailable:
				readyz[strconv.Itoa(status)]++
				t.Errorf("outage %d: GET /readyz answered %d while Postgres was down, want 503", o, status)
			default:
				readyz["503"]++
			}
			time.Sleep(250 * time.Millisecond)
		}
		upFrom := time.Now()
		if err := c.Start(ctx, c.Port()); err != nil {
			t.Fatal(err)
		}
		up := time.Now()
		if !p.alive() {
			t.Fatalf("outage %d: serve exited while Postgres was down: %v\n%s", o, p.err, p.tail(40))
		}

		// While it was down: only 503s, each within the client's 5 s.
		during := answersBetween(res, "", down, upFrom)
		if during["503"] == 0 || len(during) != 1 {
			t.Errorf("outage %d: webhook answers while Postgres was down: %v, want only 503s (and some)", o, during)
		}

		// Back: /readyz 200 and a delivery sent after the restart answered 2xx.
		readyAfter, deliveredAfter := untilBack(res, p.base, up)
		if readyAfter < 0 {
			t.Errorf("outage %d: /readyz not 200 within a minute of Postgres being back", o)
		}
		if deliveredAfter < 0 {
			t.Errorf("outage %d: no delivery answered 2xx within a minute of Postgres being back", o)
		}
		t.Logf("outage %d: down %s; /readyz while down %v; webhook answers while down %v; "+
			"after the restart /readyz 200 in %s, first 2xx delivery in %s",
			o, upFrom.Sub(down).Round(time.Millisecond), readyz, during,
			readyAfter.Round(time.Millisecond), deliveredAfter.Round(time.Millisecond))
	}
	time.Sleep(2 * time.Second)
	close(stopFeeding)
	sent := <-loadDone
	t.Logf("load: %d deliveries sent", len(sent))

	pool := openPool(t, dsn)
	checkIntake(t, pool, res, sent)
	waitSettled(t, pool, gh, len(sent), 4*time.Minute)
	checkCompleted(t, pool)
	checkGitHub(t, gh, mustItems(t, pool), replayNotices(t, pool))
	if err := p.terminate(time.Minute); err != nil {
		t.Errorf("serve on SIGTERM: %v, want exit 0", err)
	}
}
