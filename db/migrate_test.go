package db_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbtest"
)

// TestMigrateEmpty: Migrate on an empty database applies every migration,
// Status follows, a second Migrate applies nothing, and the result is the
// schema the test template (dbtest.New, dbtest.URL) is cloned from.
func TestMigrateEmpty(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	count, target := embeddedMigrations(t)
	pool := openPool(t, dbtest.EmptyURL(t))

	st, err := db.Status(ctx, pool)
	if err != nil {
		t.Fatalf("Status before Migrate: %v", err)
	}
	if st.Current != 0 || st.Target != target || st.Ready() {
		t.Errorf("Status before Migrate = %+v (Ready %v), want Current 0, Target %d, not Ready",
			st, st.Ready(), target)
	}

	n, err := db.Migrate(ctx, pool)
	if err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	if n != count {
		t.Errorf("first Migrate applied %d migrations, want all %d", n, count)
	}

	st, err = db.Status(ctx, pool)
	if err != nil {
		t.Fatalf("Status after Migrate: %v", err)
	}
	if st.Current != target || st.Target != target || !st.Ready() {
		t.Errorf("Status after Migrate = %+v (Ready %v), want Current = Target = %d, Ready",
			st, st.Ready(), target)
	}

	n, err = db.Migrate(ctx, pool)
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if n != 0 {
		t.Errorf("second Migrate applied %d migrations, want 0", n)
	}

	want := dumpSchema(t, pool)
	if got := dumpSchema(t, dbtest.New(t)); got != want {
		t.Errorf("dbtest.New's schema differs from a migrated empty database:\n%s", lineDiff(want, got))
	}
	if got := dumpSchema(t, openPool(t, dbtest.URL(t))); got != want {
		t.Errorf("dbtest.URL's schema differs from a migrated empty database:\n%s", lineDiff(want, got))
	}
}

// TestMigrateConcurrent: migrators racing on one empty database (several
// `gitlease serve` processes starting at once) all succeed, each migration is
// applied and recorded exactly once, and the schema is the usual one.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	count, _ := embeddedMigrations(t)
	want := referenceSchema(t)

	url := dbtest.EmptyURL(t)
	const migrators = 4
	pools := make([]*pgxpool.Pool, migrators)
	for i := range pools {
		pools[i] = openPool(t, url)
		if err := pools[i].Ping(ctx); err != nil { // connect before the race starts
			t.Fatalf("ping: %v", err)
		}
	}

	var (
		start   = make(chan struct{})
		wg      sync.WaitGroup
		applied [migrators]int
		errs    [migrators]error
	)
	for i, pool := range pools {
		wg.Go(func() {
			<-start
			applied[i], errs[i] = db.Migrate(ctx, pool)
		})
	}
	close(start)
	wg.Wait()

	total := 0
	for i := range migrators {
		if errs[i] != nil {
			t.Errorf("migrator %d: %v", i, errs[i])
		}
		total += applied[i]
	}
	if total != count {
		t.Errorf("migrators applied %v migrations, %d in all; want %d in all", applied, total, count)
	}

	rows, err := pools[0].Query(ctx,
		"SELECT version_id, count(*) FROM goose_db_version GROUP BY version_id ORDER BY version_id")
	if err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	type versionCount struct{ Version, N int64 }
	recorded, err := pgx.CollectRows(rows, pgx.RowToStructByPos[versionCount])
	if err != nil {
		t.Fatalf("read goose_db_version: %v", err)
	}
	for _, r := range recorded {
		if r.N != 1 {
			t.Errorf("version %d recorded %d times, want once", r.Version, r.N)
		}
	}

	if got := dumpSchema(t, pools[0]); got != want {
		t.Errorf("schema after concurrent Migrate differs from a plain Migrate:\n%s", lineDiff(want, got))
	}
}

// TestMigrateInterrupted: killing Migrate at any point and running it again
// ends in the same schema. Each database sees several Migrate runs whose
// context expires after a random delay spread over the time a whole Migrate
// takes (and a little more), so the cuts land before the lock, while the
// version table is made, inside a migration, around its commit and after;
// then one run to completion. The cancelled run's connections are closed and
// gone before the next run, as they would be if its process had been killed.
func TestMigrateInterrupted(t *testing.T) {
	t.Parallel()
	const (
		databases   = 12
		cutsPerBase = 3
	)

	// The reference: an uninterrupted Migrate, timed to place the cuts.
	refPool := openPool(t, dbtest.EmptyURL(t))
	began := time.Now()
	if _, err := db.Migrate(t.Context(), refPool); err != nil {
		t.Fatalf("reference Migrate: %v", err)
	}
	span := max(time.Since(began)*3/2, 3*time.Millisecond)
	want := dumpSchema(t, refPool)

	// Stratified: one delay in each of databases*cutsPerBase equal slices of
	// [0, span), shuffled, so the cuts cover the whole run (and a little
	// past it) however the random draws fall.
	t.Logf("cut delays spread over [0, %v)", span)
	slots := databases * cutsPerBase
	delays := make([]time.Duration, slots)
	for k := range delays {
		delays[k] = time.Duration((float64(k) + rand.Float64()) * float64(span) / float64(slots))
	}
	rand.Shuffle(len(delays), func(i, j int) { delays[i], delays[j] = delays[j], delays[i] })

	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
	)
	t.Cleanup(func() {
		// Runs after the subtests: how far the cut runs got.
		t.Logf("interrupted runs: %v", outcomes)
		cut := 0
		for outcome, n := range outcomes {
			if strings.HasPrefix(outcome, "cut") {
				cut += n
			}
		}
		if cut == 0 {
			t.Errorf("no run was actually interrupted; the test proved nothing")
		}
	})

	for i := range databases {
		delays := delays[i*cutsPerBase : (i+1)*cutsPerBase]
		t.Run(fmt.Sprintf("db%02d", i), func(t *testing.T) {
			t.Parallel()
			url := dbtest.EmptyURL(t)
			for _, d := range delays {
				outcome := cutMigrate(t, url, d)
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
			}

			pool := openPool(t, url)
			if _, err := db.Migrate(t.Context(), pool); err != nil {
				t.Fatalf("Migrate after cut runs %v: %v", delays, err)
			}
			if got := dumpSchema(t, pool); got != want {
				t.Errorf("after cut runs %v, schema differs from an uninterrupted Migrate:\n%s",
					delays, lineDiff(want, got))
			}
		})
	}
}

// cutMigrate runs Migrate on its own pool with a context that expires after
// d, closes the pool, waits until the database has no other sessions (the
// cut run's server backends have ended and released their locks and
// transactions) and says how far the run got.
func cutMigrate(t *testing.T, url string, d time.Duration) string {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), d)
	_, migrateErr := db.Migrate(ctx, pool)
	cancel()
	pool.Close()

	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	for {
		var others int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&others)
		if err != nil {
			t.Fatalf("count sessions: %v", err)
		}
		if others == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}

	state := "no version table"
	var hasTable bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('goose_db_version') IS NOT NULL").Scan(&hasTable); err != nil {
		t.Fatalf("look for goose_db_version: %v", err)
	}
	if hasTable {
		var version int64
		if err := conn.QueryRow(ctx, "SELECT coalesce(max(version_id), 0) FROM goose_db_version").Scan(&version); err != nil {
			t.Fatalf("read goose_db_version: %v", err)
		}
		state = fmt.Sprintf("at version %d", version)
	}
	if migrateErr != nil {
		return "cut, " + state
	}
	return "completed, " + state
}

// referenceSchema is the schema dump of an empty database after Migrate.
func referenceSchema(t *testing.T) string {
	t.Helper()
	pool := openPool(t, dbtest.EmptyURL(t))
	if _, err := db.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("reference Migrate: %v", err)
	}
	return dumpSchema(t, pool)
}

// schemaQueries describe the public schema in a form that depends only on
// its definition (no OIDs, no physical order), each ordered.
var schemaQueries = []struct{ name, query string }{
	{"columns", `
		SELECT table_name, column_name, ordinal_position::text, data_type, udt_name, is_nullable,
		       coalesce(column_default, ''), is_generated, coalesce(generation_expression, ''),
		       coalesce(collation_name, '')
		FROM information_schema.columns
		WHERE table_schema = 'public'
		ORDER BY table_name, ordinal_position`},
	{"indexes", `
		SELECT tablename, indexname, indexdef
		FROM pg_indexes
		WHERE schemaname = 'public'
		ORDER BY tablename, indexname`},
	{"constraints", `
		SELECT c.conrelid::regclass::text, c.conname, c.contype::text, pg_get_constraintdef(c.oid)
		FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
		WHERE n.nspname = 'public'
		ORDER BY 1, 2`},
	{"sequences", `
		SELECT sequence_name, data_type, start_value, increment, maximum_value, cycle_option
		FROM information_schema.sequences
		WHERE sequence_schema = 'public'
		ORDER BY sequence_name`},
	{"functions", `
		SELECT p.proname, pg_get_function_identity_arguments(p.oid), pg_get_functiondef(p.oid)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public'
		ORDER BY 1, 2`},
	{"applied migrations", `
		SELECT version_id::text, is_applied::text
		FROM goose_db_version
		ORDER BY version_id, id`},
}

// dumpSchema renders the database's schema as ordered text lines.
func dumpSchema(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var b strings.Builder
	for _, q := range schemaQueries {
		fmt.Fprintf(&b, "-- %s\n", q.name)
		rows, err := pool.Query(t.Context(), q.query)
		if err != nil {
			t.Fatalf("dump %s: %v", q.name, err)
		}
		lines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
			vals, err := row.Values()
			if err != nil {
				return "", err
			}
			fields := make([]string, len(vals))
			for i, v := range vals {
				fields[i] = strings.Join(strings.Fields(fmt.Sprint(v)), " ")
			}
			return strings.Join(fields, " | "), nil
		})
		if err != nil {
			t.Fatalf("dump %s: %v", q.name, err)
		}
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if g[l] < w[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] < g[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	if b.Len() == 0 {
		return "(same lines, different order)"
	}
	return b.String()
}

// embeddedMigrations returns how many migrations are embedded and the
// highest version among them.
func embeddedMigrations(t *testing.T) (count int, highest int64) {
	t.Helper()
	files, err := fs.Glob(db.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		digits, _, ok := strings.Cut(f, "_")
		v, err := strconv.ParseInt(digits, 10, 64)
		if !ok || err != nil {
			t.Fatalf("migration %s has no version prefix", f)
		}
		count++
		highest = max(highest, v)
	}
	if count == 0 {
		t.Fatal("no embedded migrations")
	}
	return count, highest
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestMigrateMovesGitHubState: what an item recorded about GitHub in
// work_items before migration 4 is in github_items after it.
func TestMigrateMovesGitHubState(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := openPool(t, dbtest.EmptyURL(t))
	p, err := goose.NewProvider(goose.DialectPostgres, stdlib.OpenDBFromPool(pool), db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 3); err != nil {
		t.Fatalf("migrate to 3: %v", err)
	}
	// Legacy items (is_v2 false) need no subject identity.
	items := []struct{ id, extra, values string }{
		{"1", ", head_sha, check_run_id, branch, pr_number, pr_url, provisioned_generation", ", 'abc', 7, 'gitlease/issue-1', 3, 'https://x/pull/3', 1"},
		{"2", ", check_run_id", ", 9"},
		{"3", "", ""},
	}
	for _, it := range items {
		stmt := `INSERT INTO work_items (id, status, is_v2, subject_id, dispatch, enqueued_at` + it.extra +
			`) VALUES ($1, 'pending', false, 's' || $2::text, '{}', now()` + it.values + `)`
		if _, err := pool.Exec(ctx, stmt, "00000000-0000-0000-0000-00000000000"+it.id, it.id); err != nil {
			t.Fatalf("insert item %s: %v", it.id, err)
		}
	}
	if _, err := db.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var got []string
	rows, _ := pool.Query(ctx, `SELECT entry_id::text, coalesce(head_sha, ''), coalesce(check_run_id, 0), coalesce(branch, ''),
		coalesce(pr_number, 0), coalesce(pr_url, ''), coalesce(provisioned_generation, 0) FROM github_items ORDER BY entry_id`)
	for rows.Next() {
		var id, sha, branch, url string
		var run, gen int64
		var pr int32
		if err := rows.Scan(&id, &sha, &run, &branch, &pr, &url, &gen); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s %d %s %d %s %d", id[len(id)-1:], sha, run, branch, pr, url, gen))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"1 abc 7 gitlease/issue-1 3 https://x/pull/3 1", "2  9  0  0"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("github_items = %q, want %q (the item with nothing GitHub-side gets no row)", got, want)
	}
}
