package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// readyzAnswer is the JSON body of GET /readyz.
type readyzAnswer struct {
	Status          string `json:"status"`
	Reason          string `json:"reason"`
	SchemaVersion   *int64 `json:"schema_version"`
	RequiredVersion *int64 `json:"required_version"`
	Durability      string `json:"durability"`
}

// getReadyz serves one GET /readyz from a server on pool.
func getReadyz(t *testing.T, pool *pgxpool.Pool) (int, readyzAnswer) {
	t.Helper()
	h := rpc.NewHandler(queue.NewStore(pool, queue.Config{}), "test", nil)
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{}, pool, h, nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("GET /readyz Content-Type = %q, want JSON", ct)
	}
	var a readyzAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("GET /readyz body is not JSON: %v", err)
	}
	return resp.StatusCode, a
}

// TestReadyzFollowsTheSchema: on a database that was never migrated /readyz
// is 503 saying the schema is behind (and the check creates nothing); after
// migrating it is 200.
func TestReadyzFollowsTheSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	status, a := getReadyz(t, pool)
	if status != http.StatusServiceUnavailable || a.Status != "unavailable" || !strings.Contains(a.Reason, "schema behind") {
		t.Fatalf("/readyz on an empty database = %d %+v, want 503 with a reason saying the schema is behind", status, a)
	}
	if a.SchemaVersion == nil || *a.SchemaVersion != 0 || a.RequiredVersion == nil || *a.RequiredVersion <= 0 {
		t.Errorf("/readyz on an empty database: schema_version %v, required_version %v; want 0 and the latest migration",
			a.SchemaVersion, a.RequiredVersion)
	}
	var tables int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the readiness check created %d tables in an empty database, want none", tables)
	}

	if _, err := db.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	status, a = getReadyz(t, pool)
	if status != http.StatusOK || a.Status != "ready" {
		t.Fatalf("/readyz after Migrate = %d %+v, want 200 ready", status, a)
	}
	// The test server has no synchronous standby.
	if a.Durability != string(db.DurabilityLocal) {
		t.Errorf("/readyz durability = %q, want local", a.Durability)
	}
}

// TestReadyzReadOnly: a server that takes no writes (its sessions are
// read-only, as a standby's are) makes /readyz 503 saying there is no
// writable primary, whether the pool refuses it on connect (db.Open's) or
// not (a pool that skips the check).
func TestReadyzReadOnly(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	checked, err := db.PoolConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	unchecked := checked.Copy()
	unchecked.ConnConfig.ValidateConnect = nil
	for name, cfg := range map[string]*pgxpool.Config{"checked on connect": checked, "unchecked": unchecked} {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
		pool, err := db.Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		status, a := getReadyz(t, pool)
		if status != http.StatusServiceUnavailable || a.Status != "unavailable" || !strings.Contains(a.Reason, "no writable primary") ||
			!strings.Contains(a.Reason, "read-only") {
			t.Errorf("%s: /readyz on a read-only server = %d %+v, want 503 saying no writable primary, read-only", name, status, a)
		}
	}
}

// TestReadyzWithoutDatabase: a database that does not answer makes /readyz
// 503 with a reason, not a hang or a 500.
func TestReadyzWithoutDatabase(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	status, a := getReadyz(t, pool)
	if status != http.StatusServiceUnavailable || a.Reason != "database unreachable" {
		t.Fatalf("/readyz without a database = %d %+v, want 503 database unreachable", status, a)
	}
}
