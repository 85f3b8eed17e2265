package app_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
	"github.com/gitlease/gitlease/webhook"
	"github.com/gitlease/gitlease/webhook/webhooktest"
)

// TestMetricsMoveWithDeliveries scrapes /metrics after a few deliveries and
// finds the counters and gauges moved.
func TestMetricsMoveWithDeliveries(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	m := app.NewMetrics(pool)
	store := queue.NewStore(pool, queue.Config{OnOp: m.QueueOp})
	srv := app.NewServer(app.ServerConfig{}, pool, rpc.NewHandler(store, "test", nil), nil)
	m.Register(srv.Echo())
	verifier, _ := webhook.NewVerifier("metrics-secret")
	mapper, _ := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/"})
	srv.Echo().POST("/webhook", echo.WrapHandler(webhook.NewHandler(store, verifier, mapper, nil, webhook.HandlerConfig{OnAnswer: m.Delivery})))

	webhooktest.Deliver(t, srv, "metrics-secret", "issues", "m-1", "issues-opened.json", nil)
	webhooktest.Deliver(t, srv, "metrics-secret", "issues", "m-1", "issues-opened.json", nil) // replay
	webhooktest.Deliver(t, srv, "metrics-secret", "ping", "m-2", "ping.json", nil)

	// What the limiter recorded of another installation's budget.
	if _, err := pool.Exec(t.Context(), `INSERT INTO github_budgets (installation_id, remaining, "limit", reset_at, observed_at)
		VALUES (7, 42, 5000, to_timestamp(1700003600), now())`); err != nil {
		t.Fatal(err)
	}

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set(echo.HeaderXRequestID, "scrape-1")
	srv.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Header().Get(echo.HeaderXRequestID) != "scrape-1" {
		t.Fatalf("/metrics answered %d, request id %q", rec.Code, rec.Header().Get(echo.HeaderXRequestID))
	}
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`gitlease_webhook_deliveries_total{outcome="enqueued"} 1`,
		`gitlease_webhook_deliveries_total{outcome="replay"} 1`,
		`gitlease_webhook_deliveries_total{outcome="ignored"} 1`,
		`gitlease_queue_operation_duration_seconds_count{operation="enqueue",result="ok"} 1`,
		`gitlease_queue_items{status="pending"} 1`,
		`gitlease_outbox_rows{status="pending"} 0`,
		`gitlease_metrics_database_up 1`,
		`gitlease_postgres_durability{mode="local"} 1`, // the test server has no synchronous standby
		`gitlease_postgres_durability{mode="synchronous_standby"} 0`,
		`gitlease_installation_items{installation="2311213",status="pending"} 1`,
		`gitlease_installation_items{installation="2311213",status="assigned"} 0`,
		`gitlease_installation_assigned_cap 0`,
		`gitlease_github_budget_remaining{installation="7"} 42`,
		`gitlease_github_budget_limit{installation="7"} 5000`,
		`gitlease_github_budget_reset_timestamp_seconds{installation="7"} 1.7000036e+09`,
		`gitlease_http_request_duration_seconds_count{code="202",route="/webhook"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
