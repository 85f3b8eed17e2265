package ui

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// benchItems is how many items BenchmarkPages loads:
// GITLEASE_UI_BENCH_ITEMS, default 20,000 so `make bench` stays short;
// docs/BENCHMARKS.md has the 1,000,000-item run.
func benchItems(b *testing.B) int {
	n := 20_000
	if v := os.Getenv("GITLEASE_UI_BENCH_ITEMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2000 {
			b.Fatalf("GITLEASE_UI_BENCH_ITEMS=%q: want a number of at least 2000", v)
		}
	}
	return n
}

// loadBench fills a fresh database with n items, most of them finished as
// on a long-running server: the newest 1,000 pending, 100 assigned, one in
// 20,000 held, the rest completed, failed, cancelled or dropped; in 50
// repositories. Also n/10 deliveries over the last day and n/5 GitHub
// writes, all done but 100 pending and 20 failed. Then VACUUM ANALYZE, as
// autovacuum would have done by then.
func loadBench(b *testing.B, pool *pgxpool.Pool, n int) {
	ctx := context.Background()
	stmts := []string{
		`INSERT INTO work_items (id, status, is_v2, subject_id, canonical_id, subject_generation, dispatch,
			enqueued_at, finished_at, held_at, assigned_at, lease_owner, lease_generation, lease_expires_at,
			workflow_id, workflow_generation)
		SELECT gen_random_uuid(), st, true, (g % 50) || '#' || g, 'github_issue:' || (g % 50) || '#' || g, 1,
			jsonb_build_object('subject', jsonb_build_object('kind', 'github_issue', 'id', (g % 50) || '#' || g,
				'metadata', jsonb_build_object('installation_id', 1, 'repository_id', g % 50,
					'repository', 'acme/repo' || (g % 50), 'number', g,
					'html_url', 'https://github.com/acme/repo' || (g % 50) || '/issues/' || g)),
				'workflow_ref', 'coding', 'trigger_source', 'bench', 'requested_at', '2026-01-01T00:00:00Z'),
			at,
			CASE WHEN st IN ('pending', 'assigned', 'held') THEN NULL ELSE at + interval '5 minutes' END,
			CASE WHEN st = 'held' THEN at END,
			CASE WHEN st = 'assigned' THEN at END,
			CASE WHEN st = 'assigned' THEN 'bench-worker-' || (g % 3) END,
			CASE WHEN st = 'assigned' THEN 1 ELSE 0 END,
			CASE WHEN st = 'assigned' THEN now() + interval '10 minutes' END,
			CASE WHEN st = 'assigned' THEN 'wf-' || g END,
			CASE WHEN st = 'assigned' THEN 1 END
		FROM (SELECT g, now() - ($1::int - g) * interval '1 second' AS at,
			CASE WHEN g > $1::int - 1000 THEN 'pending'
			     WHEN g > $1::int - 1100 THEN 'assigned'
			     WHEN g % 20000 = 0 THEN 'held'
			     WHEN g % 10 = 1 THEN 'failed'
			     WHEN g % 10 = 2 THEN 'cancelled'
			     WHEN g % 10 = 3 THEN 'dropped'
			     ELSE 'completed' END AS st
			FROM generate_series(1, $1::int) g) s`,
		`INSERT INTO deliveries (delivery_id, event, action, repository, sender, secret_index, body_sha256,
			received_at, last_received_at, outcome, entry_id)
		SELECT 'd-' || g, CASE WHEN g % 3 = 0 THEN 'pull_request' ELSE 'issues' END, 'opened',
			'acme/repo' || (g % 50), 'octocat', 0, 'x', t, t,
			CASE WHEN g % 7 = 0 THEN 'ignored' ELSE 'enqueued' END, NULL
		FROM (SELECT g, now() - (g * 86400.0 / ($1::int / 10)) * interval '1 second' AS t
			FROM generate_series(1, $1::int / 10) g) s`,
		`INSERT INTO outbox (lane, kind, payload, created_at, available_at, attempts, status, finished_at, last_error)
		SELECT 'bench/' || g, 'check_run', '{}', now() - g * interval '1 second', now(), 1,
			CASE WHEN g <= 100 THEN 'pending' WHEN g <= 120 THEN 'failed' ELSE 'done' END,
			CASE WHEN g <= 100 THEN NULL ELSE now() END,
			CASE WHEN g > 100 AND g <= 120 THEN '422 Validation Failed' END
		FROM generate_series(1, $1::int / 5) g`,
	}
	for _, s := range stmts {
		if _, err := pool.Exec(ctx, s, n); err != nil {
			b.Fatalf("load: %v", err)
		}
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatalf("vacuum: %v", err)
	}
}

// BenchmarkPages measures the dashboard's pages over a large table, each
// through HTTP with a signed-in session, and reports the median (p50) of
// each. The overview's cold variant recounts finished items on every view
// (CountsTTL 1ns); the warm one serves them from the cache as a server
// does between recounts. With GITLEASE_UI_BENCH_EXPLAIN=1 it logs the
// plans of the pages' queries.
func BenchmarkPages(b *testing.B) {
	n := benchItems(b)
	f := newFixture(b, Config{AdminToken: adminToken})
	loadBench(b, f.pool, n)
	cold := newUIOver(b, f, Config{AdminToken: adminToken, CountsTTL: time.Nanosecond})
	br := f.signIn(adminToken)
	var middle string
	if err := f.pool.QueryRow(context.Background(),
		`SELECT (extract(epoch FROM enqueued_at) * 1000000)::bigint || '_' || id FROM work_items ORDER BY enqueued_at DESC, id DESC OFFSET $1 LIMIT 1`, n/2).Scan(&middle); err != nil {
		b.Fatal(err)
	}
	var anItem string
	if err := f.pool.QueryRow(context.Background(), `SELECT id::text FROM work_items WHERE status = 'completed' LIMIT 1`).Scan(&anItem); err != nil {
		b.Fatal(err)
	}
	pages := []struct{ name, path string }{
		{"overview_warm", "/ui/"},
		{"items", "/ui/items"},
		{"items_pending", "/ui/items?status=pending"},
		{"items_completed_middle", "/ui/items?status=completed&before=" + middle},
		{"items_repository", "/ui/items?repository=acme/repo7"},
		{"items_repository_none", "/ui/items?repository=acme/nothing-here"},
		{"items_middle", "/ui/items?before=" + middle},
		{"item", "/ui/items/" + anItem},
		{"deliveries", "/ui/deliveries"},
		{"outbox", "/ui/outbox"},
	}
	run := func(b *testing.B, get func() answer) {
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			r := get()
			ds = append(ds, time.Since(start))
			if r.code != http.StatusOK {
				b.Fatalf("status %d", r.code)
			}
		}
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	}
	b.Run("overview_cold", func(b *testing.B) { run(b, func() answer { return cold.get("/ui/") }) })
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) { run(b, func() answer { return br.get(p.path) }) })
	}
	if os.Getenv("GITLEASE_UI_BENCH_EXPLAIN") == "1" {
		explain(b, f.pool, middle)
	}
}

// newUIOver serves a second dashboard, with cfg, over f's database and
// returns a browser signed in to it.
func newUIOver(b *testing.B, f *fixture, cfg Config) *browser {
	g := *f
	// The real clock: the fixture's stands still, and a cache younger than
	// 1ns would then never expire.
	cfg.Now = time.Now
	u, err := New(f.pool, f.store, nil, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	g.ui = u
	g.srv = serve(b, u)
	return g.signIn(adminToken)
}

// explain logs the plans of the queries behind the measured pages.
func explain(b *testing.B, pool *pgxpool.Pool, middle string) {
	at, id, _ := strings.Cut(middle, "_")
	us, _ := strconv.ParseInt(at, 10, 64)
	before := time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
	queries := []string{
		`SELECT status, count(*) AS n FROM work_items WHERE status IN ('pending', 'assigned', 'held') GROUP BY status`,
		`SELECT status, count(*) AS n FROM work_items GROUP BY status`,
		`SELECT enqueued_at FROM work_items WHERE status = 'pending' ORDER BY status, enqueued_at, id LIMIT 1`,
		`SELECT coalesce(lease_owner, '') AS owner, count(*) FILTER (WHERE lease_expires_at > now()) AS live FROM work_items WHERE status = 'assigned' GROUP BY lease_owner`,
		`SELECT outcome, count(*) FROM deliveries WHERE received_at >= now() - interval '1 hour' GROUP BY outcome`,
		`SELECT status, count(*) FROM outbox WHERE status <> 'done' GROUP BY status`,
		`SELECT w.*, g.pr_number FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
		 WHERE (w.enqueued_at, w.id) < ('9999-01-01', 'ffffffff-ffff-ffff-ffff-ffffffffffff') AND ('' = '' OR true)
		 ORDER BY w.enqueued_at DESC, w.id DESC LIMIT 51`,
		`SELECT w.*, g.pr_number FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
		 WHERE w.status = 'completed' AND (w.enqueued_at, w.id) < ('` + before + `', '` + id + `')
		 ORDER BY w.status, w.enqueued_at DESC, w.id DESC LIMIT 51`,
		`SELECT w.*, g.pr_number FROM work_items w LEFT JOIN github_items g ON g.entry_id = w.id
		 WHERE lower(w.dispatch #>> '{subject,metadata,repository}') = 'acme/repo7'
		   AND (w.enqueued_at, w.id) < ('9999-01-01', 'ffffffff-ffff-ffff-ffff-ffffffffffff')
		 ORDER BY lower(w.dispatch #>> '{subject,metadata,repository}'), w.enqueued_at DESC, w.id DESC LIMIT 51`,
	}
	for _, q := range queries {
		rows, err := pool.Query(context.Background(), "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) "+q)
		if err != nil {
			b.Fatalf("explain: %v", err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		b.Logf("\n%s\n%s", q, strings.Join(plan, "\n"))
	}
}
