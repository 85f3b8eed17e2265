package app_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/app/redeliver"
	"github.com/gitlease/gitlease/db/dbtest"
)

// The reconciler's metrics hook is app.Metrics.
var _ redeliver.RedeliveryMetrics = (*app.Metrics)(nil)

func TestRedeliveryMetrics(t *testing.T) {
	t.Parallel()
	m := app.NewMetrics(dbtest.New(t))
	m.Redelivery(redeliver.ResultRequested)
	m.Redelivery(redeliver.ResultRequested)
	m.Redelivery(redeliver.ResultGitHubRefused)
	m.RedeliveryScan(time.Unix(1764576000, 0))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`gitlease_redeliveries_total{result="requested"} 2`,
		`gitlease_redeliveries_total{result="github_refused"} 1`,
		`gitlease_redeliveries_total{result="rejected_skipped"} 0`,
		`gitlease_redeliveries_total{result="unrecoverable"} 0`,
		`gitlease_redelivery_last_scan_timestamp_seconds 1.764576e+09`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
