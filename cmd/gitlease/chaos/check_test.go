package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/webhook"
)

// openPool opens a small pool on dsn for the test's own queries.
func openPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// item is a work item row as the checks see it.
type item struct {
	ID, QualifiedID, Status, Owner string
	Generation, LeaseGeneration    int64
	Branch, HeadSHA                string
	PRNumber                       int
	CheckRunID                     int64
}

// loadItems reads every work item, by entry ID.
func loadItems(ctx context.Context, pool *pgxpool.Pool) (map[string]item, error) {
	rows, err := pool.Query(ctx, `
		SELECT w.id::text, coalesce(w.canonical_id, ''), w.status, coalesce(w.lease_owner, ''),
		       coalesce(w.subject_generation, 0), w.lease_generation, coalesce(g.branch, ''), coalesce(g.head_sha, ''),
		       coalesce(g.pr_number, 0), coalesce(g.check_run_id, 0)
		FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id`)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (item, error) {
		var it item
		err := r.Scan(&it.ID, &it.QualifiedID, &it.Status, &it.Owner, &it.Generation, &it.LeaseGeneration,
			&it.Branch, &it.HeadSHA, &it.PRNumber, &it.CheckRunID)
		return it, err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]item, len(list))
	for _, it := range list {
		out[it.ID] = it
	}
	return out, nil
}

func mustItems(t *testing.T, pool *pgxpool.Pool) map[string]item {
	t.Helper()
	items, err := loadItems(context.Background(), pool)
	if err != nil {
		t.Fatalf("read work items: %v", err)
	}
	return items
}

// checkIntake checks the webhook side: every delivery was answered 2xx at
// last; every 2xx answer is recorded in deliveries with the entry it named;
// an enqueued answer's entry exists once, for the delivery's subject; no
// subject has two live items, nor two items at all (each subject got one
// opened delivery).
func checkIntake(t *testing.T, pool *pgxpool.Pool, res *loadResult, ds []delivery) {
	t.Helper()
	ctx := context.Background()
	failures := res.Failures()
	for id, why := range failures {
		t.Errorf("delivery %s was never answered 2xx: %s", id, why)
	}
	answers := res.Answers()
	items := mustItems(t, pool)
	type deliveryRow struct {
		outcome, entry string
		attempts       int
	}
	rows, err := pool.Query(ctx, `SELECT delivery_id, outcome, coalesce(entry_id::text, ''), attempts FROM deliveries`)
	if err != nil {
		t.Fatalf("read deliveries: %v", err)
	}
	recorded := map[string]deliveryRow{}
	for rows.Next() {
		var id string
		var d deliveryRow
		if err := rows.Scan(&id, &d.outcome, &d.entry, &d.attempts); err != nil {
			t.Fatal(err)
		}
		recorded[id] = d
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	bySubject := map[string]string{}
	twoXX := 0
	for _, d := range ds {
		as := answers[d.ID]
		if len(as) == 0 {
			continue // reported as a failure above
		}
		twoXX++
		row, ok := recorded[d.ID]
		if !ok {
			t.Errorf("delivery %s was answered %d %s but is not in deliveries", d.ID, as[0].Status, as[0].Outcome)
			continue
		}
		first := as[0]
		for i, a := range as {
			switch {
			case i == 0 && a.Outcome != webhook.OutcomeEnqueued && a.Outcome != webhook.OutcomeReplay,
				i > 0 && a.Outcome != webhook.OutcomeReplay:
				t.Errorf("delivery %s answer %d: %d %s (%s), want enqueued first and replay after", d.ID, i+1, a.Status, a.Outcome, a.Reason)
			case a.EntryID == "" || a.EntryID != first.EntryID:
				t.Errorf("delivery %s answer %d names entry %q, answer 1 named %q", d.ID, i+1, a.EntryID, first.EntryID)
			case a.DeliveryID != d.ID:
				t.Errorf("delivery %s answer %d is about delivery %q", d.ID, i+1, a.DeliveryID)
			}
		}
		if row.outcome != string(webhook.OutcomeEnqueued) || row.entry != first.EntryID {
			t.Errorf("delivery %s is recorded as %s of entry %q; its answer was %s of entry %q",
				d.ID, row.outcome, row.entry, first.Outcome, first.EntryID)
		}
		if row.attempts < len(as) {
			t.Errorf("delivery %s is recorded with %d arrivals but was answered 2xx %d times", d.ID, row.attempts, len(as))
		}
		it, ok := items[first.EntryID]
		switch {
		case !ok:
			t.Errorf("delivery %s was answered %s of entry %s, which does not exist", d.ID, first.Outcome, first.EntryID)
		case it.QualifiedID != d.QualifiedID() || it.Generation != 1:
			t.Errorf("entry %s of delivery %s is generation %d of %s, want generation 1 of %s",
				it.ID, d.ID, it.Generation, it.QualifiedID, d.QualifiedID())
		}
		if prev, dup := bySubject[d.QualifiedID()]; dup && prev != first.EntryID {
			t.Errorf("subject %s has two entries: %s and %s", d.QualifiedID(), prev, first.EntryID)
		}
		bySubject[d.QualifiedID()] = first.EntryID
	}

	// The database's own view: one item per subject, each from a delivery.
	perSubject := map[string][]string{}
	for _, it := range items {
		perSubject[it.QualifiedID] = append(perSubject[it.QualifiedID], it.ID+" ("+it.Status+")")
	}
	for qid, ids := range perSubject {
		if len(ids) > 1 {
			sort.Strings(ids)
			t.Errorf("subject %s has %d items, want 1: %s", qid, len(ids), strings.Join(ids, ", "))
		}
		if _, ok := bySubject[qid]; !ok {
			t.Errorf("subject %s has an item no 2xx answer named: %v", qid, ids)
		}
	}
	var live int
	if err := pool.QueryRow(ctx, `
		SELECT count(*) FROM (SELECT canonical_id FROM work_items
		WHERE status IN ('pending', 'assigned', 'held') GROUP BY canonical_id HAVING count(*) > 1) s`).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != 0 {
		t.Errorf("%d subjects have more than one live item", live)
	}
	var took []time.Duration
	for _, a := range res.Attempts() {
		if a.Status >= 200 && a.Status < 300 {
			took = append(took, a.End.Sub(a.Start))
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	p50, slowest := time.Duration(0), time.Duration(0)
	if len(took) > 0 {
		p50, slowest = took[len(took)/2], took[len(took)-1]
	}
	t.Logf("intake: %d deliveries, %d answered 2xx, %d recorded, %d items; attempts by answer %v; 2xx latency p50 %s, max %s",
		len(ds), twoXX, len(recorded), len(items), res.Summary(), p50.Round(100*time.Microsecond), slowest.Round(100*time.Microsecond))
}

// queueState is a one-line picture of the queue and the outbox.
type queueState struct {
	Items, Terminal, Completed int
	ByStatus                   map[string]int
	OutboxPending, OutboxDone  int
	OutboxFailed, OutboxLocked int
}

// readQueueState counts items by status and outbox rows by state.
func readQueueState(ctx context.Context, pool *pgxpool.Pool) (queueState, error) {
	s := queueState{ByStatus: map[string]int{}}
	rows, err := pool.Query(ctx, `SELECT status, count(*) FROM work_items GROUP BY status`)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return s, err
		}
		s.ByStatus[st] = n
		s.Items += n
		switch st {
		case "completed", "failed", "cancelled", "dropped":
			s.Terminal += n
		}
	}
	if err := rows.Err(); err != nil {
		return s, err
	}
	s.Completed = s.ByStatus["completed"]
	err = pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'done'),
		       count(*) FILTER (WHERE status = 'failed'),
		       count(*) FILTER (WHERE status = 'pending' AND locked_until > now())
		FROM outbox`).Scan(&s.OutboxPending, &s.OutboxDone, &s.OutboxFailed, &s.OutboxLocked)
	return s, err
}

// claimedRows lists the outbox rows under a live claim, by ID ("kind lane,
// claimed for n s more"): after a kill, the ones the dead sender had taken.
func claimedRows(ctx context.Context, pool *pgxpool.Pool) (map[int64]string, error) {
	rows, err := pool.Query(ctx, `
		SELECT id, kind || ' ' || lane || ', claimed for ' || round(extract(epoch FROM locked_until - now())) || ' s more'
		FROM outbox WHERE status = 'pending' AND locked_until > now()`)
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var what string
		if err := rows.Scan(&id, &what); err != nil {
			return nil, err
		}
		out[id] = what
	}
	return out, rows.Err()
}

// String is the state on one line.
func (s queueState) String() string {
	return fmt.Sprintf("items %d %v; outbox pending %d (claimed %d), done %d, failed %d",
		s.Items, s.ByStatus, s.OutboxPending, s.OutboxLocked, s.OutboxDone, s.OutboxFailed)
}

// waitSettled waits until want items exist and all are terminal, the
// outbox has nothing pending, and the fake GitHub holds a concluded check
// run for each item: the point after which nothing changes any more. It
// returns how long that took, or fails the test after within, describing
// what was still moving.
func waitSettled(t *testing.T, pool *pgxpool.Pool, gh *githubtest.Server, want int, within time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	lastLog := start
	for {
		s, err := readQueueState(ctx, pool)
		concluded := 0
		for _, cr := range gh.CheckRuns(repoFull) {
			if cr.Status == "completed" && !strings.HasPrefix(cr.ExternalID, "delivery:") {
				concluded++
			}
		}
		if err == nil && s.Items == want && s.Terminal == want && s.OutboxPending == 0 && concluded >= want {
			took := time.Since(start)
			t.Logf("settled after %s: %s", took.Round(100*time.Millisecond), s)
			return took
		}
		if time.Since(start) > within {
			describeStuck(t, pool)
			t.Fatalf("not settled within %s: %s (err %v), %d concluded check runs; want %d items, all terminal, outbox drained",
				within, s, err, concluded, want)
		}
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			t.Logf("settling, %s: %s, %d concluded check runs", time.Since(start).Round(time.Second), s, concluded)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// describeStuck logs the items that are not terminal and the outbox rows
// still pending, and reports as errors the feedback that can never be sent:
// check-run rows of an issue item that finished without a branch (they
// wait for a head commit nothing will record any more).
func describeStuck(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT w.id::text, w.canonical_id, w.status, coalesce(w.lease_owner, ''), w.lease_generation,
		       coalesce(round(extract(epoch FROM w.lease_expires_at - now()))::text, ''), coalesce(g.branch, ''), coalesce(g.head_sha, '')
		FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
		WHERE w.finished_at IS NULL ORDER BY w.enqueued_at LIMIT 30`)
	if err == nil {
		for rows.Next() {
			var id, qid, st, owner, exp, branch, sha string
			var lg int64
			_ = rows.Scan(&id, &qid, &st, &owner, &lg, &exp, &branch, &sha)
			t.Logf("unfinished item %s %s: %s, owner %q, lease generation %d, lease expires in %ss, branch %q, head %q",
				id, qid, st, owner, lg, exp, branch, sha)
		}
		rows.Close()
	}
	rows, err = pool.Query(ctx, `
		SELECT id, lane, kind, attempts, round(extract(epoch FROM available_at - now()))::text,
		       coalesce(round(extract(epoch FROM locked_until - now()))::text, ''), coalesce(last_error, '')
		FROM outbox WHERE status <> 'done' ORDER BY id LIMIT 40`)
	if err == nil {
		for rows.Next() {
			var id int64
			var lane, kind, avail, locked, lastErr string
			var attempts int
			_ = rows.Scan(&id, &lane, &kind, &attempts, &avail, &locked, &lastErr)
			t.Logf("outbox row %d %s %s: attempts %d, due in %ss, claimed for %qs more, last error %q",
				id, lane, kind, attempts, avail, locked, truncate(lastErr, 160))
		}
		rows.Close()
	}
	rows, err = pool.Query(ctx, `
		SELECT w.id::text, w.canonical_id, w.status, count(o.id)
		FROM work_items w JOIN outbox o ON o.entry_id = w.id AND o.kind = 'check_run' AND o.status = 'pending'
		LEFT JOIN github_items g ON g.entry_id = w.id
		WHERE w.finished_at IS NOT NULL AND g.head_sha IS NULL
		GROUP BY w.id, w.canonical_id, w.status ORDER BY w.canonical_id`)
	if err == nil {
		for rows.Next() {
			var id, qid, st string
			var n int
			_ = rows.Scan(&id, &qid, &st, &n)
			t.Errorf("item %s (%s) ended %s without a branch: its %d check-run writes wait for a head commit "+
				"that will never be recorded, so its check run is lost", id, qid, st, n)
		}
		rows.Close()
	}
}

// checkCompleted checks the queue after it settled: every item completed,
// its check run concluded exactly once (one "completed" check-run write in
// the outbox), GitHub told of every lease once (one "in_progress" write per
// lease generation), and no outbox row failed.
func checkCompleted(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	items := mustItems(t, pool)
	recovered := 0
	for _, it := range items {
		if it.Status != "completed" {
			t.Errorf("item %s (%s) ended %s, want completed", it.ID, it.QualifiedID, it.Status)
		}
		if it.LeaseGeneration > 1 {
			recovered++
		}
	}
	rows, err := pool.Query(ctx, `
		SELECT entry_id::text,
		       count(*) FILTER (WHERE payload->>'status' = 'completed'),
		       count(*) FILTER (WHERE payload->>'status' = 'in_progress'),
		       count(*) FILTER (WHERE kind = 'provision')
		FROM outbox WHERE entry_id IS NOT NULL GROUP BY entry_id`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var id string
		var completions, starts, provisions int64
		if err := rows.Scan(&id, &completions, &starts, &provisions); err != nil {
			t.Fatal(err)
		}
		seen[id] = true
		it := items[id]
		if completions != 1 {
			t.Errorf("item %s (%s) has %d completion writes in the outbox, want 1: it finished %d times",
				id, it.QualifiedID, completions, completions)
		}
		if starts != it.LeaseGeneration {
			t.Errorf("item %s (%s) has %d in_progress writes in the outbox for lease generation %d, want one per lease",
				id, it.QualifiedID, starts, it.LeaseGeneration)
		}
		if strings.HasPrefix(it.QualifiedID, "github_issue:") && (provisions < 1 || provisions > it.LeaseGeneration) {
			t.Errorf("item %s (%s) has %d provision rows for lease generation %d", id, it.QualifiedID, provisions, it.LeaseGeneration)
		}
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for id, it := range items {
		if !seen[id] {
			t.Errorf("item %s (%s) has no outbox rows at all", id, it.QualifiedID)
		}
	}
	failed, err := pool.Query(ctx, `SELECT id, lane, kind, coalesce(last_error, '') FROM outbox WHERE status = 'failed' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for failed.Next() {
		var id int64
		var lane, kind, lastErr string
		if err := failed.Scan(&id, &lane, &kind, &lastErr); err != nil {
			t.Fatal(err)
		}
		t.Errorf("outbox row %d (%s, %s) failed: %s", id, lane, kind, lastErr)
	}
	if failed.Err() != nil {
		t.Fatal(failed.Err())
	}
	t.Logf("queue: %d items, %d of them leased more than once (recovered or released)", len(items), recovered)
}

// replayNotices returns, per entry, how many replays the intake recorded
// (each arrival after the first of a delivery): each must show as exactly
// one notice on the entry's check run.
func replayNotices(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT entry_id::text, sum(attempts - 1) FROM deliveries WHERE entry_id IS NOT NULL GROUP BY entry_id`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

// subjectState is what one subject ended as, on GitHub and in the queue:
// the final state two runs of one workload are compared by.
type subjectState struct {
	Items        int
	Status       string
	Branches     int    // gitlease/issue-<n> branches (issues)
	PullRequests int    // pull requests gitlease opened for it (issues)
	CheckRuns    int    // check runs with an entry's external ID
	Conclusion   string // of its check runs, comma-separated
	Notices      int    // annotations on its check runs
}

// checkGitHub checks the fake GitHub against the settled queue, item by
// item: an issue item has exactly one branch gitlease/issue-<n>, made of
// one new commit on main and never moved, exactly one pull request from it
// whose body closes the issue and carries the item's marker, and the
// branch and pull request recorded on the item; every item has exactly one
// check run with its entry ID as external_id, on its head commit, concluded
// success, recorded on the item, carrying notices[entry] replay notices.
// Nothing else exists. It returns each subject's state.
func checkGitHub(t *testing.T, gh *githubtest.Server, items map[string]item, notices map[string]int) map[string]subjectState {
	t.Helper()
	mainSHA, _ := gh.Branch(repoFull, "main")
	prsByHead := map[string][]githubtest.PullRequest{}
	for _, pr := range gh.PullRequests(repoFull) {
		if pr.ByApp {
			prsByHead[pr.Head] = append(prsByHead[pr.Head], pr)
		}
	}
	runsByEntry := map[string][]githubtest.CheckRun{}
	for _, cr := range gh.CheckRuns(repoFull) {
		runsByEntry[cr.ExternalID] = append(runsByEntry[cr.ExternalID], cr)
	}
	branches := map[string]bool{}
	for _, b := range gh.Branches(repoFull) {
		branches[b] = true
	}

	out := map[string]subjectState{}
	wantBranches := map[string]bool{}
	for _, it := range items {
		st := out[it.QualifiedID]
		st.Items++
		st.Status = it.Status
		if number, ok := strings.CutPrefix(it.QualifiedID, fmt.Sprintf("github_issue:%d#", repoID)); ok {
			branch := "gitlease/issue-" + number
			wantBranches[branch] = true
			sha, exists := gh.Branch(repoFull, branch)
			if exists {
				st.Branches++
				c, ok := gh.Commit(repoFull, sha)
				if !ok || len(c.Parents) != 1 || c.Parents[0] != mainSHA || !c.ViaAPI {
					t.Errorf("branch %s points at %s (%+v), want one API commit on main %s", branch, sha, c, mainSHA)
				}
			} else {
				t.Errorf("item %s (%s) has no branch %s", it.ID, it.QualifiedID, branch)
			}
			if it.Branch != branch || it.HeadSHA != sha {
				t.Errorf("item %s records branch %q at %q; GitHub has %s at %q", it.ID, it.Branch, it.HeadSHA, branch, sha)
			}
			prs := prsByHead[branch]
			st.PullRequests = len(prs)
			if len(prs) != 1 {
				t.Errorf("branch %s has %d pull requests by gitlease, want 1", branch, len(prs))
			}
			for _, pr := range prs {
				checkMarker(t, pr, it, number)
			}
		}
		runs := runsByEntry[it.ID]
		st.CheckRuns += len(runs)
		if len(runs) != 1 {
			t.Errorf("item %s (%s) has %d check runs with its external_id, want 1", it.ID, it.QualifiedID, len(runs))
		}
		var conclusions []string
		for _, cr := range runs {
			conclusions = append(conclusions, cr.Conclusion)
			st.Notices += len(cr.Annotations)
			if cr.Name != "gitlease" || cr.Status != "completed" || cr.Conclusion != "success" {
				t.Errorf("check run %d of item %s (%s): %s %s/%s, want gitlease completed/success",
					cr.ID, it.ID, it.QualifiedID, cr.Name, cr.Status, cr.Conclusion)
			}
			if it.HeadSHA != "" && cr.HeadSHA != it.HeadSHA {
				t.Errorf("check run %d of item %s is on %s, the item's head is %s", cr.ID, it.ID, cr.HeadSHA, it.HeadSHA)
			}
			if it.CheckRunID != cr.ID {
				t.Errorf("item %s records check run %d, GitHub has %d", it.ID, it.CheckRunID, cr.ID)
			}
			for _, a := range cr.Annotations {
				if a.Level != "notice" || a.Title != "Delivery replayed" {
					t.Errorf("check run %d of item %s has an unexpected %s annotation %q: %s", cr.ID, it.ID, a.Level, a.Title, a.Message)
				}
			}
		}
		st.Conclusion = strings.Join(conclusions, ",")
		if want := notices[it.ID]; st.Notices != want {
			t.Errorf("item %s (%s) has %d annotations on its check run; the intake recorded %d replays, each must show once",
				it.ID, it.QualifiedID, st.Notices, want)
		}
		out[it.QualifiedID] = st
	}
	for b := range branches {
		if b != "main" && !wantBranches[b] && !strings.HasPrefix(b, "chaos-pr-") {
			t.Errorf("branch %s belongs to no item", b)
		}
	}
	for head, prs := range prsByHead {
		if !wantBranches[head] {
			t.Errorf("gitlease opened %d pull requests from %s, which belongs to no item", len(prs), head)
		}
	}
	for ext, runs := range runsByEntry {
		if _, ok := items[ext]; !ok {
			t.Errorf("%d check runs with external_id %q belong to no item", len(runs), ext)
		}
	}
	if n := gh.Count(githubtest.KindUpdateRef); n != 0 {
		t.Errorf("gitlease updated a ref %d times; it must never move one", n)
	}
	return out
}

// checkMarker checks a pull request gitlease opened for issue number: it
// closes the issue and its marker names the item.
func checkMarker(t *testing.T, pr githubtest.PullRequest, it item, number string) {
	t.Helper()
	if pr.Base != "main" || !pr.Draft || pr.State != "open" || !strings.Contains(pr.Body, "Closes #"+number+"\n") {
		t.Errorf("pull request #%d for %s: base %s, draft %v, %s, body %q; want an open draft to main closing #%s",
			pr.Number, it.QualifiedID, pr.Base, pr.Draft, pr.State, pr.Body, number)
	}
	m := regexp.MustCompile(`<!-- gitlease (\{.*?\}) -->`).FindStringSubmatch(pr.Body)
	var got struct {
		QualifiedID string `json:"qualified_id"`
		Generation  int64  `json:"generation"`
		EntryID     string `json:"entry_id"`
	}
	if m == nil || json.Unmarshal([]byte(m[1]), &got) != nil {
		t.Errorf("pull request #%d for %s has no gitlease marker: %q", pr.Number, it.QualifiedID, pr.Body)
		return
	}
	if got.EntryID != it.ID || got.QualifiedID != it.QualifiedID || got.Generation != it.Generation {
		t.Errorf("pull request #%d marker %+v, want entry %s, %s generation %d", pr.Number, got, it.ID, it.QualifiedID, it.Generation)
	}
	if it.PRNumber != pr.Number {
		t.Errorf("item %s records pull request #%d, GitHub has #%d", it.ID, it.PRNumber, pr.Number)
	}
}
