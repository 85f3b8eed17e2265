package app

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/queue"
)

// Metrics are gitlease's Prometheus metrics, on a registry of their own (no
// global state). See docs/metrics.md.
type Metrics struct {
	reg        *prometheus.Registry
	deliveries *prometheus.CounterVec
	queueOps   *prometheus.HistogramVec
	github     *prometheus.CounterVec
	httpReqs   *prometheus.HistogramVec
	// The redelivery reconciler's (docs/webhook.md).
	redeliveries *prometheus.CounterVec
	lastScan     prometheus.Gauge
	groups       *prometheus.HistogramVec
	cap          prometheus.Gauge
}

// NewMetrics registers gitlease's metrics, plus Go and process metrics, and
// collectors that read queue depth and outbox backlog from pool at scrape.
func NewMetrics(pool *pgxpool.Pool) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitlease_webhook_deliveries_total",
			Help: "Webhook deliveries answered, by outcome (enqueued, replay, subject_collision, reservation_collision, cancelled, ignored, idempotency_conflict, rejected, unavailable).",
		}, []string{"outcome"}),
		queueOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gitlease_queue_operation_duration_seconds",
			Help:    "Duration of queue operations (enqueue, lease, renew, recover, complete, release_pending), by operation and result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"operation", "result"}),
		github: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitlease_github_requests_total",
			Help: "GitHub API requests, by HTTP status code (\"error\" when no response came).",
		}, []string{"code"}),
		httpReqs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gitlease_http_request_duration_seconds",
			Help:    "HTTP requests served, by route and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "code"}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gitlease_redeliveries_total",
			Help: "Webhook deliveries the redelivery reconciler acted on, by result (requested, rejected_skipped, unrecoverable, github_refused).",
		}, []string{"result"}),
		lastScan: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gitlease_redelivery_last_scan_timestamp_seconds",
			Help: "Unix time of the redelivery reconciler's last successful scan of GitHub's delivery log (0: none yet).",
		}),
		groups: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gitlease_webhook_group_deliveries",
			Help:    "Deliveries per group the intake recorded in one transaction (two or more), by result (committed, rolled_back: its deliveries were then recorded one by one).",
			Buckets: []float64{2, 3, 4, 6, 8, 12, 16, 32, 64},
		}, []string{"result"}),
		cap: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gitlease_installation_assigned_cap",
			Help: "GITLEASE_MAX_ASSIGNED_PER_INSTALLATION: most items of one GitHub installation assigned at once (0: no cap).",
		}),
	}
	for _, r := range []string{"requested", "rejected_skipped", "unrecoverable", "github_refused"} {
		m.redeliveries.WithLabelValues(r) // every result shows from the start, at 0
	}
	m.reg.MustRegister(m.deliveries, m.queueOps, m.github, m.httpReqs, m.redeliveries, m.lastScan, m.groups, m.cap,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&dbCollector{pool: pool})
	return m
}

// InstallationCap shows the cap on one installation's assigned items.
func (m *Metrics) InstallationCap(n int) { m.cap.Set(float64(n)) }

// Delivery counts one answered webhook delivery.
func (m *Metrics) Delivery(outcome string) { m.deliveries.WithLabelValues(outcome).Inc() }

// Redelivery counts one delivery the redelivery reconciler reached result
// for (github.RedeliveryMetrics).
func (m *Metrics) Redelivery(result string) { m.redeliveries.WithLabelValues(result).Inc() }

// RedeliveryScan records the time of a successful redelivery scan
// (github.RedeliveryMetrics).
func (m *Metrics) RedeliveryScan(at time.Time) { m.lastScan.Set(float64(at.UnixNano()) / 1e9) }

// IntakeGroup records one group of deliveries the intake recorded together
// (webhook.HandlerConfig.OnGroup).
func (m *Metrics) IntakeGroup(size int, committed bool) {
	result := "committed"
	if !committed {
		result = "rolled_back"
	}
	m.groups.WithLabelValues(result).Observe(float64(size))
}

// QueueOp records one queue operation (for queue.Config.OnOp).
func (m *Metrics) QueueOp(op string, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.queueOps.WithLabelValues(op, result).Observe(d.Seconds())
}

// Transport counts every GitHub API call made through it.
func (m *Metrics) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode)
		}
		m.github.WithLabelValues(code).Inc()
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Middleware times every HTTP request by route.
func (m *Metrics) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		code := c.Response().Status
		if err != nil {
			var he *echo.HTTPError
			if errors.As(err, &he) {
				code = he.Code
			}
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.httpReqs.WithLabelValues(route, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
		return err
	}
}

// Register serves GET /metrics and times every route.
func (m *Metrics) Register(e *echo.Echo) {
	e.Use(m.Middleware)
	e.GET("/metrics", echo.WrapHandler(m.Handler()))
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// dbCollector reads queue depth and outbox backlog at scrape time.
type dbCollector struct {
	pool *pgxpool.Pool
}

var (
	queueDepthDesc = prometheus.NewDesc("gitlease_queue_items", "Live work items, by status (deferred: pending with run_at in the future).", []string{"status"}, nil)
	outboxDesc     = prometheus.NewDesc("gitlease_outbox_rows", "GitHub outbox rows waiting to be sent (pending) or given up on (failed).", []string{"status"}, nil)
	scrapeErrDesc  = prometheus.NewDesc("gitlease_metrics_database_up", "1 when the database answered the metrics scrape, else 0.", nil, nil)
	durabilityDesc = prometheus.NewDesc("gitlease_postgres_durability",
		"1 for how durable a commit acknowledged to gitlease is (synchronous_standby: a synchronous standby has it; local: only the primary), 0 for the other; absent while no writable primary answers.",
		[]string{"mode"}, nil)
	// Per installation (0: items over /rpc and stdio), never per repository.
	installationItemsDesc = prometheus.NewDesc("gitlease_installation_items", "Pending and assigned work items of one installation (0: /rpc and stdio items), by status.", []string{"installation", "status"}, nil)
	installationPauseDesc = prometheus.NewDesc("gitlease_installation_paused_until_timestamp_seconds", "Unix time until which leases pass an installation's items over: its GitHub credential is rate-limited (absent: not paused).", []string{"installation"}, nil)
	budgetRemainingDesc   = prometheus.NewDesc("gitlease_github_budget_remaining", "An installation's GitHub requests left, as x-ratelimit-remaining last said.", []string{"installation"}, nil)
	budgetLimitDesc       = prometheus.NewDesc("gitlease_github_budget_limit", "An installation's GitHub requests an hour, as x-ratelimit-limit last said.", []string{"installation"}, nil)
	budgetResetDesc       = prometheus.NewDesc("gitlease_github_budget_reset_timestamp_seconds", "Unix time of an installation's GitHub budget reset, as x-ratelimit-reset last said.", []string{"installation"}, nil)
)

// installationsShown bounds the installations one scrape reports.
const installationsShown = 1000

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- outboxDesc
	ch <- scrapeErrDesc
	ch <- durabilityDesc
	ch <- installationItemsDesc
	ch <- installationPauseDesc
	ch <- budgetRemainingDesc
	ch <- budgetLimitDesc
	ch <- budgetResetDesc
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := queue.ReadStats(ctx, c.pool, time.Now())
	if err == nil {
		for status, n := range map[string]int64{"pending": st.Pending, "assigned": st.Assigned, "held": st.Held, "deferred": st.Deferred} {
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(n), status)
		}
		var b outbox.Backlog
		if b, err = outbox.ReadBacklog(ctx, c.pool); err == nil {
			ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(b.Pending), "pending")
			ch <- prometheus.MustNewConstMetric(outboxDesc, prometheus.GaugeValue, float64(b.Failed), "failed")
		}
	}
	if err == nil {
		var srv db.Server
		if srv, err = db.ReadServer(ctx, c.pool); err == nil && !srv.ReadOnly {
			for _, d := range []db.Durability{db.DurabilitySynchronousStandby, db.DurabilityLocal} {
				v := 0.0
				if srv.Durability == d {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(durabilityDesc, prometheus.GaugeValue, v, string(d))
			}
		}
	}
	if err == nil {
		err = c.collectInstallations(ctx, ch)
	}
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, up)
}

// collectInstallations reports each installation's items, pause and budget.
func (c *dbCollector) collectInstallations(ctx context.Context, ch chan<- prometheus.Metric) error {
	loads, err := queue.ReadInstallations(ctx, c.pool, time.Now(), installationsShown)
	if err != nil {
		return err
	}
	budgets, err := github.ReadBudgets(ctx, c.pool, installationsShown)
	if err != nil {
		return err
	}
	for _, l := range loads {
		inst := strconv.FormatInt(l.InstallationID, 10)
		ch <- prometheus.MustNewConstMetric(installationItemsDesc, prometheus.GaugeValue, float64(l.Pending), inst, "pending")
		ch <- prometheus.MustNewConstMetric(installationItemsDesc, prometheus.GaugeValue, float64(l.Assigned), inst, "assigned")
		if l.PausedUntil != nil {
			ch <- prometheus.MustNewConstMetric(installationPauseDesc, prometheus.GaugeValue, float64(l.PausedUntil.Unix()), inst)
		}
	}
	for _, b := range budgets {
		inst := strconv.FormatInt(b.InstallationID, 10)
		if b.Remaining != nil {
			ch <- prometheus.MustNewConstMetric(budgetRemainingDesc, prometheus.GaugeValue, float64(*b.Remaining), inst)
		}
		if b.Limit != nil {
			ch <- prometheus.MustNewConstMetric(budgetLimitDesc, prometheus.GaugeValue, float64(*b.Limit), inst)
		}
		if b.Reset != nil {
			ch <- prometheus.MustNewConstMetric(budgetResetDesc, prometheus.GaugeValue, float64(b.Reset.Unix()), inst)
		}
	}
	return nil
}
