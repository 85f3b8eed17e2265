package chaos_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/db/pgcluster"
)

// startReplicated starts a primary and a standby of it (pg_basebackup -R,
// streaming) through db/pgcluster, both throwaway clusters the test owns,
// and waits until the standby streams. With sync the primary waits for the
// standby on every commit (synchronous_standby_names '*'); without it the
// standby is asynchronous. Either way the primary's synchronous_commit is
// on, unlike other throwaway clusters: a commit is acknowledged once it is
// on its disk (and, with sync, the standby's).
func startReplicated(t *testing.T, sync bool) (primary, standby *pgcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	settings := map[string]string{"synchronous_commit": "on"}
	if sync {
		settings["synchronous_standby_names"] = "*"
	}
	bindir := os.Getenv("GITLEASE_PG_BINDIR")
	primary, err := pgcluster.StartTemp(ctx, nil, "", pgcluster.Config{BinDir: bindir, MaxConnections: 100, Settings: settings})
	if err != nil {
		t.Fatalf("the failover tests need PostgreSQL clusters of their own (install PostgreSQL or set GITLEASE_PG_BINDIR): %v", err)
	}
	t.Cleanup(func() {
		if err := primary.Remove(ctx); err != nil {
			t.Logf("remove the primary: %v", err)
		}
	})
	standby, err = pgcluster.StartTempStandby(ctx, nil, "", primary, pgcluster.Config{BinDir: bindir, MaxConnections: 100})
	if err != nil {
		t.Fatalf("make the standby: %v", err)
	}
	t.Cleanup(func() {
		if err := standby.Remove(ctx); err != nil {
			t.Logf("remove the standby: %v", err)
		}
	})
	pool := openPool(t, primary.URL("postgres"))
	want := "async"
	if sync {
		want = "sync"
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var state string
		err := pool.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'").Scan(&state)
		if err == nil && state == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby does not stream as %s within a minute: %q, %v", want, state, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pool.Close()
	t.Logf("primary on port %d (%s), %s standby on port %d (%s)", primary.Port(), primary.Dir(), want, standby.Port(), standby.Dir())
	return primary, standby
}

// hostsURL is a DATABASE_URL naming the clusters' hosts in that order,
// with target_session_attrs=tsa unless tsa is empty.
func hostsURL(tsa string, cs ...*pgcluster.Cluster) string {
	hosts := make([]string, len(cs))
	for i, c := range cs {
		hosts[i] = "127.0.0.1:" + strconv.Itoa(c.Port())
	}
	u := "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable"
	if tsa != "" {
		u += "&target_session_attrs=" + tsa
	}
	return u
}

// ackedBefore returns the deliveries whose first 2xx answer ended before
// t, with that answer's start.
func ackedBefore(res *loadResult, t time.Time) map[string]time.Time {
	starts := map[string]time.Time{}
	for _, a := range res.Attempts() {
		if a.Status >= 200 && a.Status < 300 && a.End.Before(t) {
			if s, ok := starts[a.DeliveryID]; !ok || a.Start.Before(s) {
				starts[a.DeliveryID] = a.Start
			}
		}
	}
	return starts
}

// recordedDeliveries reads the delivery IDs the database holds.
func recordedDeliveries(t *testing.T, pool *pgxpool.Pool) map[string]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT delivery_id FROM deliveries")
	if err != nil {
		t.Fatalf("read deliveries: %v", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFailover runs two `gitlease serve` on a primary with a synchronous
// standby, one with DATABASE_URL naming the primary first with
// target_session_attrs=read-write, the other naming the standby first with
// no target_session_attrs, under a stream of issue deliveries spread over
// both (redelivered after a 5xx, as GitHub does). It kills the primary with
// SIGKILL, promotes the standby, and then brings the old primary back as a
// standby of the new one on its old port. It requires: before the kill,
// both say /readyz 200 with durability synchronous_standby and write only
// to the primary; during the switch every answer is 503 (no 500, no hang),
// /readyz 503 saying there is no writable primary; within 5 s of the
// promotion each serve answers /readyz 200 and deliveries 2xx again,
// without a restart; with the old primary back as a standby only 2xx; and
// at the end every delivery answered 2xx before the kill is on the new
// primary, every delivery is recorded once with one item, every item is
// completed once with one branch, pull request and check run on GitHub.
func TestFailover(t *testing.T) {
	t.Parallel()
	sc := chaosScale()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	primary, standby := startReplicated(t, true)
	total := int((sc.foBefore+sc.foOutage+sc.foAfter+30*time.Second)/sc.foPace) + 1
	gh := newGitHub(t, total)
	bin := buildGitlease(t)
	dir := logDir(t)
	urls := []string{hostsURL("read-write", primary, standby), hostsURL("", standby, primary)}
	names := []string{"serve A (primary first, target_session_attrs=read-write)", "serve B (standby first, no target_session_attrs)"}
	var procs []*serveProc
	t.Cleanup(func() { logProblems(t, procs) })
	for i, u := range urls {
		procs = append(procs, startServe(t, bin, serveEnv(u, gh, 5*time.Second), dir, i))
	}
	probe := &http.Client{Timeout: 5 * time.Second}
	for i, p := range procs {
		waitReady(t, p.base, 30*time.Second)
		if a := getReadyz(probe, p.base); a.Durability != "synchronous_standby" {
			t.Errorf("%s: /readyz before the failover = %d %+v, want durability synchronous_standby", names[i], a.Status, a)
		}
	}

	ds := make([]delivery, total)
	for i := range ds {
		ds[i] = issueDelivery(t, i+1)
	}
	res := newLoadResult()
	var turn atomic.Uint64
	snd := newSender(func() string { return procs[turn.Add(1)%2].base }, 5*time.Second, 3*time.Minute, res)
	stopFeeding := make(chan struct{})
	loadDone := make(chan []delivery, 1)
	go func() { loadDone <- snd.run(ctx, ds, 4, sc.foPace, stopFeeding) }()

	time.Sleep(sc.foBefore)
	before := answersBetween(res, "", time.Time{}, time.Now())
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	// Once Kill returns every server process is gone: what was answered
	// 2xx by then was committed before.
	killAt := time.Now()
	readyzDuring := map[string]int{}
	for time.Since(killAt) < sc.foOutage {
		for i, p := range procs {
			a := getReadyz(probe, p.base)
			readyzDuring[fmt.Sprintf("%d %s", a.Status, a.Reason)]++
			if a.Status != http.StatusServiceUnavailable || !strings.Contains(a.Reason, "no writable primary") {
				t.Errorf("%s: /readyz with the primary dead and the standby not promoted = %d %+v, want 503 saying no writable primary", names[i], a.Status, a)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	promoteFrom := time.Now()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	during := answersBetween(res, "", killAt, promoteFrom)
	if during["503"] == 0 || len(during) != 1 {
		t.Errorf("webhook answers between the kill and the promotion: %v, want only 503s (and some)", during)
	}
	for i, p := range procs {
		readyAfter, deliveredAfter := untilBack(res, p.base, promoted)
		t.Logf("%s: after the promotion /readyz 200 in %s, first 2xx delivery in %s", names[i],
			readyAfter.Round(time.Millisecond), deliveredAfter.Round(time.Millisecond))
		if readyAfter < 0 || readyAfter > 5*time.Second || deliveredAfter < 0 || deliveredAfter > 5*time.Second {
			t.Errorf("%s: /readyz 200 after %s and a 2xx delivery after %s of the promotion, want both within 5 s (-1: not within a minute)",
				names[i], readyAfter, deliveredAfter)
		}
		if a := getReadyz(probe, p.base); a.Durability != "local" {
			t.Errorf("%s: /readyz after the promotion = %d %+v, want durability local (the new primary has no standby)", names[i], a.Status, a)
		}
	}

	// The old primary comes back, as a standby of the new one, on its port:
	// serve A names it first.
	if err := primary.RemoveData(ctx); err != nil {
		t.Fatal(err)
	}
	if err := primary.InitStandby(ctx, standby); err != nil {
		t.Fatal(err)
	}
	if err := primary.Start(ctx, primary.Port()); err != nil {
		t.Fatal(err)
	}
	backAt := time.Now()
	time.Sleep(sc.foAfter)
	close(stopFeeding)
	sent := <-loadDone
	after := answersBetween(res, "", backAt, time.Now().Add(time.Hour))
	for code, n := range after {
		if code != "200" && code != "202" {
			t.Errorf("with the old primary back as a standby: %d answers %s, want only 2xx (all answers %v)", n, code, after)
		}
	}
	for _, a := range res.Attempts() {
		if a.Status == http.StatusInternalServerError {
			t.Errorf("delivery %s was answered 500 at %s (the kill at %s)", a.DeliveryID, a.Start.Format(time.StampMilli), killAt.Format(time.StampMilli))
		}
	}

	pool := openPool(t, standby.URL("postgres"))
	acked := ackedBefore(res, killAt)
	recorded := recordedDeliveries(t, pool)
	kept := 0
	for id := range acked {
		if recorded[id] {
			kept++
		} else {
			t.Errorf("delivery %s was answered 2xx before the kill and is not on the new primary", id)
		}
	}
	checkIntake(t, pool, res, sent)
	waitSettled(t, pool, gh, len(sent), 4*time.Minute)
	checkCompleted(t, pool)
	checkGitHub(t, gh, mustItems(t, pool), replayNotices(t, pool))
	st, err := readQueueState(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	doubled := doubledSubjects(t, pool)
	t.Logf("failover (synchronous standby): %d deliveries sent; answers before the kill %v; acked before the kill %d, on the new primary after %d; "+
		"kill→promotion %s, answers meanwhile %v, /readyz meanwhile %v; with the old primary back as a standby: answers %v; items %d, completed %d, doubled %d",
		len(sent), before, len(acked), kept, promoteFrom.Sub(killAt).Round(time.Millisecond), during, readyzDuring, after, st.Items, st.Completed, doubled)
	for i, p := range procs {
		if err := p.terminate(time.Minute); err != nil {
			t.Errorf("%s on SIGTERM: %v, want exit 0", names[i], err)
		}
	}
}

// doubledSubjects counts the subjects with more than one work item.
func doubledSubjects(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `
		SELECT count(*) FROM (SELECT canonical_id FROM work_items GROUP BY canonical_id HAVING count(*) > 1) s`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFailoverAsynchronous runs `gitlease serve` on a primary with an
// asynchronous standby under a stream of deliveries, stalls replication
// (SIGSTOP to the primary's WAL sender) while deliveries are answered,
// kills the primary, promotes the standby and counts what was lost: every
// delivery answered 2xx after the stall began, whose commit never left the
// primary, is gone from the new primary, as /readyz's durability "local"
// warned. gitlease comes back on the new primary without a restart.
func TestFailoverAsynchronous(t *testing.T) {
	t.Parallel()
	sc := chaosScale()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	primary, standby := startReplicated(t, false)
	total := int((sc.foBefore+sc.foStall+30*time.Second)/sc.foPace) + 1
	gh := newGitHub(t, total)
	bin := buildGitlease(t)
	dir := logDir(t)
	p := startServe(t, bin, serveEnv(hostsURL("", primary, standby), gh, 5*time.Second), dir, 0)
	t.Cleanup(func() { logProblems(t, []*serveProc{p}) })
	waitReady(t, p.base, 30*time.Second)
	probe := &http.Client{Timeout: 5 * time.Second}
	if a := getReadyz(probe, p.base); a.Durability != "local" {
		t.Errorf("/readyz with an asynchronous standby = %d %+v, want durability local", a.Status, a)
	}

	ds := make([]delivery, total)
	for i := range ds {
		ds[i] = issueDelivery(t, i+1)
	}
	res := newLoadResult()
	snd := newSender(func() string { return p.base }, 5*time.Second, 2*time.Minute, res)
	stopFeeding := make(chan struct{})
	loadDone := make(chan []delivery, 1)
	go func() { loadDone <- snd.run(ctx, ds, 4, sc.foPace, stopFeeding) }()
	time.Sleep(sc.foBefore)

	ppool := openPool(t, primary.URL("postgres"))
	var sender int
	if err := ppool.QueryRow(ctx, "SELECT pid FROM pg_stat_replication").Scan(&sender); err != nil {
		t.Fatalf("find the WAL sender: %v", err)
	}
	ppool.Close()
	if err := syscall.Kill(sender, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop the WAL sender %d: %v", sender, err)
	}
	stallAt := time.Now()
	time.Sleep(sc.foStall)
	if err := primary.Kill(); err != nil { // the stopped sender with it
		t.Fatal(err)
	}
	killAt := time.Now()
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	readyAfter, deliveredAfter := untilBack(res, p.base, promoted)
	close(stopFeeding)
	sent := <-loadDone

	pool := openPool(t, standby.URL("postgres"))
	recorded := recordedDeliveries(t, pool)
	acked := ackedBefore(res, killAt)
	var lost, ackedInStall, lostInStall int
	for id, start := range acked {
		inStall := start.After(stallAt)
		if inStall {
			ackedInStall++
		}
		if !recorded[id] {
			lost++
			if inStall {
				lostInStall++
			}
		}
	}
	t.Logf("failover (asynchronous standby): %d deliveries sent; acked before the kill %d, of them %d during the %s replication stall; "+
		"lost after the promotion %d (%d of those acked during the stall); /readyz said local; after the promotion /readyz 200 in %s, first 2xx in %s",
		len(sent), len(acked), ackedInStall, sc.foStall, lost, lostInStall, readyAfter.Round(time.Millisecond), deliveredAfter.Round(time.Millisecond))
	if ackedInStall == 0 {
		t.Errorf("no delivery was answered 2xx during the replication stall: the test shows nothing")
	}
	if lostInStall != ackedInStall {
		t.Errorf("%d of the %d deliveries acked during the stall survived: their commits never reached the standby", ackedInStall-lostInStall, ackedInStall)
	}
	if readyAfter < 0 || deliveredAfter < 0 {
		t.Errorf("after the promotion: /readyz 200 after %s, a 2xx after %s (-1: not within a minute)", readyAfter, deliveredAfter)
	}
	if err := p.terminate(time.Minute); err != nil {
		t.Errorf("serve on SIGTERM: %v, want exit 0", err)
	}
}

// TestStandbyAlone runs `gitlease serve` with DATABASE_URL naming only a
// standby: serve starts, /readyz is 503 saying there is no writable
// primary, every delivery is answered 503 and none is recorded; once the
// primary is gone and the standby promoted, serve answers /readyz 200 and
// deliveries 2xx within 5 s, without a restart, and applies the migrations
// it could not apply at start.
func TestStandbyAlone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	primary, standby := startReplicated(t, false)
	gh := newGitHub(t, 40)
	bin := buildGitlease(t)
	dir := logDir(t)
	migrate := exec.CommandContext(ctx, bin, "migrate")
	migrate.Env = serveEnv(primary.URL("postgres"), gh, time.Minute)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("gitlease migrate on the primary: %v\n%s", err, out)
	}
	// The standby replays the schema.
	spool := openPool(t, standby.URL("postgres"))
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var lag bool
		err := spool.QueryRow(ctx, "SELECT to_regclass('deliveries') IS NULL").Scan(&lag)
		if err == nil && !lag {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby has no schema a minute after the migration: %v", err)
		}
	}
	spool.Close()

	p := startServe(t, bin, serveEnv(hostsURL("", standby), gh, 5*time.Second), dir, 0)
	t.Cleanup(func() { logProblems(t, []*serveProc{p}) })
	probe := &http.Client{Timeout: 5 * time.Second}
	res := newLoadResult()
	snd := newSender(func() string { return p.base }, 5*time.Second, time.Minute, res)
	answers := map[string]int{}
	for i := range 10 {
		a := getReadyz(probe, p.base)
		if a.Status != http.StatusServiceUnavailable || !strings.Contains(a.Reason, "no writable primary") {
			t.Errorf("/readyz on a standby alone = %d %+v, want 503 saying no writable primary", a.Status, a)
		}
		status, _, err := snd.post(ctx, issueDelivery(t, i+1))
		answers[strconv.Itoa(status)]++
		if err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("a delivery on a standby alone: %d, %v; want 503", status, err)
		}
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	ds := make([]delivery, 20)
	for i := range ds {
		ds[i] = issueDelivery(t, 20+i+1)
	}
	loadDone := make(chan []delivery, 1)
	go func() { loadDone <- snd.run(ctx, ds, 2, 100*time.Millisecond, nil) }()
	readyAfter, deliveredAfter := untilBack(res, p.base, promoted)
	<-loadDone
	t.Logf("standby alone: deliveries answered %v, /readyz 503 (no writable primary); after the promotion /readyz 200 in %s, first 2xx in %s",
		answers, readyAfter.Round(time.Millisecond), deliveredAfter.Round(time.Millisecond))
	if readyAfter < 0 || readyAfter > 5*time.Second || deliveredAfter < 0 || deliveredAfter > 5*time.Second {
		t.Errorf("after the promotion: /readyz 200 after %s, a 2xx after %s; want both within 5 s (-1: not within a minute)", readyAfter, deliveredAfter)
	}
	// serve could not migrate at start; it does once a host takes writes.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.tail(1000), `"msg":"migrations applied"`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("serve did not apply its migrations within 30 s of the promotion")
			break
		}
	}
	pool := openPool(t, standby.URL("postgres"))
	recorded := recordedDeliveries(t, pool)
	var early []string
	for _, a := range res.Attempts() {
		if a.Start.Before(promoted) && recorded[a.DeliveryID] {
			early = append(early, a.DeliveryID)
		}
	}
	sort.Strings(early)
	if len(early) > 0 {
		t.Errorf("deliveries answered 503 on the standby are recorded: %v", early)
	}
	if err := p.terminate(time.Minute); err != nil {
		t.Errorf("serve on SIGTERM: %v, want exit 0", err)
	}
}
