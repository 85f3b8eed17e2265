// Package redeliver is the redelivery reconciler (SPEC §6.1): it reads the
// App's webhook delivery log on GitHub and asks GitHub to redeliver what
// never reached gitlease, at most MaxRedeliveryRequests times each. It owns
// the redelivery tables and alone writes them; one instance at a time scans
// (an advisory lock), and a redelivery claim is exclusive across instances.
package redeliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/webhook"
)

// Reconciler bounds and defaults (docs/webhook.md).
const (
	// MaxRedeliverLookback is how long github.com keeps its delivery log;
	// the reconciler never pages further back (unless configured for
	// GitHub Enterprise Server). It is the default lookback too.
	MaxRedeliverLookback = 72 * time.Hour
	// EnterpriseLogRetention is how long GitHub Enterprise Server keeps its
	// delivery log: there the lookback may reach this far.
	EnterpriseLogRetention = 7 * 24 * time.Hour
	// DefaultRedeliverInterval is the time between scans in serve.
	DefaultRedeliverInterval = 5 * time.Minute
	// DefaultRedeliverOverlap is how far before the high-water mark a scan
	// starts, for attempts GitHub lists a little late.
	DefaultRedeliverOverlap = 5 * time.Minute
	// MaxRedeliveryRequests is how many redeliveries of one guid are
	// requested before it is recorded as unrecoverable.
	MaxRedeliveryRequests = 3
	// MinDeliveryRetention is the shortest delivery-record retention that
	// keeps a recorded delivery from ever being requested again: as long as
	// GitHub keeps its log (on GitHub Enterprise Server,
	// EnterpriseLogRetention).
	MinDeliveryRetention = MaxRedeliverLookback
)

// The results of gitlease_redeliveries_total{result}.
const (
	ResultRequested       = "requested"        // GitHub accepted a redelivery request (202)
	ResultRejectedSkipped = "rejected_skipped" // gitlease refused the delivery as bad input; not requested
	ResultUnrecoverable   = "unrecoverable"    // still failing after MaxRedeliveryRequests requests
	ResultGitHubRefused   = "github_refused"   // GitHub answered 422 (too old, or "spammed"); not retried
)

// The outcomes a scan reports for a guid, beside the results above.
const (
	OutcomeRecorded      = "recorded"       // failed on GitHub's side, but gitlease committed it
	OutcomeIrrelevant    = "irrelevant"     // an event or action gitlease does not act on
	OutcomeWaiting       = "waiting"        // requested; GitHub has not shown the redelivery's attempt yet
	OutcomeWouldRequest  = "would_request"  // dry run: would be requested
	OutcomeRequestFailed = "request_failed" // the request did not reach GitHub or failed; tried again next scan
	OutcomeClaimed       = "claimed"        // another scan requested it at the same time
)

// resultRequesting marks a claimed request whose answer is not recorded yet.
const resultRequesting = "requesting"

// redeliverLockKey is the session advisory lock one scan at a time holds
// ("gitlease" in ASCII; goose's migration lock uses another key).
const redeliverLockKey int64 = 0x6769746c65617365

// staleClaim is how long a claimed request may go unrecorded before another
// scan takes it as lost (the claiming process died between claim and answer).
const staleClaim = 10 * time.Minute

// RedeliveryMetrics receives the reconciler's counts; app.Metrics
// implements it.
type RedeliveryMetrics interface {
	// Redelivery counts one guid reaching result (a Result* constant).
	Redelivery(result string)
	// RedeliveryScan records the end of a successful scan.
	RedeliveryScan(at time.Time)
}

// ReconcilerConfig configures a Reconciler. The zero value is usable.
type ReconcilerConfig struct {
	// Lookback is how far back the first scan looks (no high-water mark
	// yet). Default and maximum LogRetention.
	Lookback time.Duration
	// LogRetention is how long the GitHub it talks to keeps its delivery
	// log, the furthest any scan pages back: MaxRedeliverLookback
	// (github.com, the default) or EnterpriseLogRetention.
	LogRetention time.Duration
	// Overlap is how far before the high-water mark later scans start.
	// Default DefaultRedeliverOverlap.
	Overlap time.Duration
	// LabelTrigger says a trigger label is configured, so "labeled"
	// deliveries are acted on (see webhook.Acts).
	LabelTrigger bool
	// Metrics, if set, receives results and scan times.
	Metrics RedeliveryMetrics
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconciler finds webhook deliveries GitHub failed to deliver and asks
// GitHub to redeliver them (docs/webhook.md). Its state lives in PostgreSQL, so
// any number of serve instances can run it: a session advisory lock keeps
// scans one at a time, and each request is claimed by a compare-and-swap on
// the guid's row, so a guid is requested once per failed attempt even if two
// scans overlap. It is safe for concurrent use.
type Reconciler struct {
	pool   *pgxpool.Pool
	gh     *github.Installations
	q      *dbq.Queries
	cfg    ReconcilerConfig
	logger *slog.Logger
}

// NewReconciler returns a Reconciler over pool, calling GitHub as the App
// through gh. It returns an error when cfg.Lookback exceeds
// cfg.LogRetention.
func NewReconciler(pool *pgxpool.Pool, gh *github.Installations, cfg ReconcilerConfig, logger *slog.Logger) (*Reconciler, error) {
	if cfg.LogRetention <= 0 {
		cfg.LogRetention = MaxRedeliverLookback
	}
	if cfg.Lookback > cfg.LogRetention || cfg.Lookback < 0 {
		return nil, fmt.Errorf("redelivery lookback %s is outside 0..%s (GitHub keeps deliveries %s)", cfg.Lookback, cfg.LogRetention, cfg.LogRetention)
	}
	if cfg.Lookback == 0 {
		cfg.Lookback = cfg.LogRetention
	}
	if cfg.Overlap <= 0 {
		cfg.Overlap = DefaultRedeliverOverlap
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{pool: pool, gh: gh, q: dbq.New(), cfg: cfg, logger: logger}, nil
}

// ScanOptions narrow one scan. The zero value is serve's periodic scan.
type ScanOptions struct {
	// Since, if set, scans back this far (at most LogRetention)
	// instead of to the high-water mark, and leaves the mark alone.
	Since time.Duration
	// GUID, if set, considers only that delivery.
	GUID string
	// DryRun lists and decides but requests and records nothing.
	DryRun bool
	// IncludeRejected requests deliveries gitlease refused as bad input
	// (400, 401, 409, 413) too, after the cause was fixed.
	IncludeRejected bool
	// Wait waits for a scan running elsewhere to finish instead of
	// skipping this one.
	Wait bool
}

// Finding is what a scan found and did about one guid that has no OK
// attempt in the scanned window.
type Finding struct {
	GUID, Event, Action string
	// AttemptID, StatusCode, Status and DeliveredAt describe the newest
	// attempt; Attempts counts the guid's attempts in the window.
	AttemptID   int64
	StatusCode  int
	Status      string
	DeliveredAt time.Time
	Attempts    int
	// Requests is how many redeliveries of it gitlease has requested.
	Requests int
	// Outcome is a Result* or Outcome* constant.
	Outcome string
	Detail  string
}

// Report is what one scan did.
type Report struct {
	// Skipped is true when another scan held the lock (nothing was done).
	Skipped bool
	// From is the oldest delivery time scanned.
	From time.Time
	// Pages and Attempts count the delivery-log pages read and attempts
	// in the window; GUIDs the distinct deliveries among them.
	Pages, Attempts, GUIDs int
	// Findings lists the guids without an OK attempt, oldest first.
	Findings []Finding
}

// Count returns how many findings have outcome.
func (r Report) Count(outcome string) int {
	n := 0
	for _, f := range r.Findings {
		if f.Outcome == outcome {
			n++
		}
	}
	return n
}

// Run is one periodic scan, for service.Periodic: it logs a summary when
// it found anything.
func (r *Reconciler) Run(ctx context.Context) error {
	rep, err := r.Scan(ctx, ScanOptions{})
	if err != nil {
		return err
	}
	if rep.Count(ResultRequested) > 0 || rep.Count(OutcomeRequestFailed) > 0 {
		r.logger.InfoContext(ctx, "redelivery scan", "pages", rep.Pages, "attempts", rep.Attempts,
			"requested", rep.Count(ResultRequested), "request_failed", rep.Count(OutcomeRequestFailed),
			"rejected_skipped", rep.Count(ResultRejectedSkipped), "unrecoverable", rep.Count(ResultUnrecoverable))
	}
	return nil
}

// Scan reads the App's webhook delivery log back to the high-water mark
// less the overlap (opts.Since instead, if set; the lookback on the first
// scan; never past the log's retention), groups the attempts by guid, and
// requests one redelivery, with the newest attempt's ID, of each guid that
// has no OK attempt, is not in the deliveries table, is acted on
// (webhook.Acts), and whose newest attempt was not refused by gitlease as
// bad input (400, 401, 409, 413) unless opts.IncludeRejected. A guid
// already requested is requested again only for a newer failed attempt, at
// most MaxRedeliveryRequests times; then it is recorded as unrecoverable. A
// 422 from GitHub is recorded and not retried. A periodic scan then moves
// the high-water mark to the newest attempt it saw (not past a request that
// failed to reach GitHub, so the next scan tries it again).
//
// Only one scan runs at a time across every process on the database:
// without opts.Wait a scan finding another running returns a Report with
// Skipped set; a dry run takes no lock. Scan returns an error when the
// database or GitHub's delivery log cannot be read, or when GitHub limits
// the App's requests; what was requested before that stays recorded.
func (r *Reconciler) Scan(ctx context.Context, opts ScanOptions) (Report, error) {
	var rep Report
	if !opts.DryRun {
		unlock, ok, err := r.lock(ctx, opts.Wait)
		if err != nil {
			return rep, err
		}
		if !ok {
			rep.Skipped = true
			return rep, nil
		}
		defer unlock()
	}
	now := r.cfg.Now()
	periodic := opts.Since == 0 && opts.GUID == "" && !opts.DryRun
	from, err := r.from(ctx, now, opts.Since)
	if err != nil {
		return rep, err
	}
	rep.From = from
	client := r.gh.AppClient()
	attempts, pages, err := listAttempts(ctx, client, from)
	rep.Pages, rep.Attempts = pages, len(attempts)
	if err != nil {
		return rep, err
	}
	groups := groupAttempts(attempts)
	rep.GUIDs = len(groups)
	failed := make([]*attemptGroup, 0, len(groups))
	for _, g := range groups {
		if !g.ok && (opts.GUID == "" || g.guid == opts.GUID) {
			failed = append(failed, g)
		}
	}
	slices.SortFunc(failed, func(a, b *attemptGroup) int { return a.newest.GetDeliveredAt().Compare(b.newest.GetDeliveredAt().Time) })
	guids := make([]string, len(failed))
	for i, g := range failed {
		guids[i] = g.guid
	}
	recorded, err := r.q.RedeliveryRecorded(ctx, r.pool, guids)
	if err != nil {
		return rep, fmt.Errorf("read which failed deliveries gitlease recorded: %w", err)
	}
	states, err := r.q.RedeliveryGetMany(ctx, r.pool, guids)
	if err != nil {
		return rep, fmt.Errorf("read redelivery state: %w", err)
	}
	isRecorded := make(map[string]bool, len(recorded))
	for _, id := range recorded {
		isRecorded[id] = true
	}
	stateOf := make(map[string]*dbq.Redelivery, len(states))
	for i := range states {
		stateOf[states[i].Guid] = &states[i]
	}

	highWater := from.Add(r.cfg.Overlap)
	if len(attempts) > 0 {
		highWater = attempts[0].GetDeliveredAt().Time
	}
	var stopErr error
	for _, g := range failed {
		if stopErr == nil && ctx.Err() != nil {
			stopErr = fmt.Errorf("redelivery scan: %w", ctx.Err())
		}
		f := g.finding()
		if st := stateOf[g.guid]; st != nil {
			f.Requests = int(st.Requests)
		}
		switch {
		case isRecorded[g.guid]:
			f.Outcome = OutcomeRecorded
		case !webhook.Acts(f.Event, f.Action, r.cfg.LabelTrigger):
			f.Outcome = OutcomeIrrelevant
		case stopErr != nil:
			f.Outcome, f.Detail = OutcomeRequestFailed, "not tried: "+stopErr.Error()
		default:
			if err := r.decide(ctx, client, &f, stateOf[g.guid], opts, now); err != nil {
				stopErr = err
			}
		}
		if f.Outcome == OutcomeRequestFailed && f.DeliveredAt.Before(highWater) {
			highWater = f.DeliveredAt
		}
		rep.Findings = append(rep.Findings, f)
	}
	if stopErr != nil {
		return rep, stopErr
	}
	if periodic {
		if err := r.q.RedeliveryScanAdvance(ctx, r.pool, dbq.RedeliveryScanAdvanceParams{HighWater: highWater, Now: now}); err != nil {
			return rep, fmt.Errorf("record the redelivery scan's high-water mark: %w", err)
		}
	}
	if !opts.DryRun && r.cfg.Metrics != nil {
		r.cfg.Metrics.RedeliveryScan(now)
	}
	return rep, nil
}

// from returns the oldest delivery time a scan looks at.
func (r *Reconciler) from(ctx context.Context, now time.Time, since time.Duration) (time.Time, error) {
	floor := now.Add(-r.cfg.LogRetention)
	var from time.Time
	switch {
	case since > 0:
		from = now.Add(-since)
	default:
		scan, err := r.q.RedeliveryScanGet(ctx, r.pool)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			from = now.Add(-r.cfg.Lookback)
		case err != nil:
			return time.Time{}, fmt.Errorf("read the redelivery high-water mark: %w", err)
		default:
			from = scan.HighWater.Add(-r.cfg.Overlap)
		}
	}
	if from.Before(floor) {
		from = floor
	}
	return from, nil
}

// decide settles one failed, unrecorded, acted-on guid: skip it as
// rejected, give up on it, wait for its redelivery, or request one. It
// returns an error only when GitHub limits the App's requests, so the scan
// stops asking.
func (r *Reconciler) decide(ctx context.Context, client *gh.Client, f *Finding, st *dbq.Redelivery, opts ScanOptions, now time.Time) error {
	newer := st == nil || f.AttemptID > st.LastAttemptID
	switch {
	case st != nil && (st.Result == ResultUnrecoverable || st.Result == ResultGitHubRefused):
		f.Outcome = st.Result
		f.Detail = dbq.Deref(st.Detail)
		return nil
	case rejectedAsBadInput(f.StatusCode) && !opts.IncludeRejected:
		f.Outcome = ResultRejectedSkipped
		r.mark(ctx, f, ResultRejectedSkipped, opts.DryRun, now)
		return nil
	case st != nil && st.Requests >= MaxRedeliveryRequests && (newer || st.Result == OutcomeRequestFailed):
		f.Outcome = ResultUnrecoverable
		r.mark(ctx, f, ResultUnrecoverable, opts.DryRun, now)
		if !opts.DryRun {
			r.logger.WarnContext(ctx, "webhook delivery unrecoverable: still failing after redeliveries",
				"delivery_id", f.GUID, "event", f.Event, "action", f.Action, "requests", f.Requests, "status_code", f.StatusCode)
		}
		return nil
	case st != nil && st.Requests > 0 && !newer && (st.Result == ResultRequested ||
		(st.Result == resultRequesting && !st.UpdatedAt.Before(now.Add(-staleClaim)))):
		// Requested, or being requested by another scan, for this very
		// attempt: the redelivery's own attempt has not shown up yet.
		f.Outcome = OutcomeWaiting
		return nil
	case opts.DryRun:
		f.Outcome = OutcomeWouldRequest
		return nil
	}
	return r.request(ctx, client, f, now)
}

// request claims and sends one redelivery request for f.
func (r *Reconciler) request(ctx context.Context, client *gh.Client, f *Finding, now time.Time) error {
	row, err := r.q.RedeliveryClaim(ctx, r.pool, dbq.RedeliveryClaimParams{
		Guid: f.GUID, Event: f.Event, Action: optional(f.Action), AttemptID: f.AttemptID,
		StatusCode: int32(f.StatusCode), Now: now, StaleBefore: now.Add(-staleClaim),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		f.Outcome = OutcomeClaimed
		return nil
	}
	if err != nil {
		f.Outcome, f.Detail = OutcomeRequestFailed, "claim: "+err.Error()
		return nil
	}
	f.Requests = int(row.Requests)
	_, resp, err := client.Apps.RedeliverHookDelivery(ctx, f.AttemptID)
	var accepted *gh.AcceptedError
	var stop error
	switch {
	case err == nil || errors.As(err, &accepted):
		f.Outcome = ResultRequested
	case resp != nil && resp.StatusCode == http.StatusUnprocessableEntity:
		f.Outcome, f.Detail = ResultGitHubRefused, githubMessage(err)
	default:
		f.Outcome, f.Detail = OutcomeRequestFailed, githubMessage(err)
		var rate *gh.RateLimitError
		var abuse *gh.AbuseRateLimitError
		if errors.As(err, &rate) || errors.As(err, &abuse) {
			stop = fmt.Errorf("request redelivery of %s: %w", f.GUID, err)
		}
	}
	// The answer is recorded on a context of its own: a request GitHub
	// accepted must be counted even when the scan is being cancelled.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.q.RedeliverySetResult(rctx, r.pool, dbq.RedeliverySetResultParams{
		Guid: f.GUID, Result: f.Outcome, Detail: optional(f.Detail), Now: now,
	}); err != nil {
		r.logger.WarnContext(ctx, "record redelivery result", "delivery_id", f.GUID, "err", err)
	}
	switch f.Outcome {
	case ResultRequested:
		r.logger.InfoContext(ctx, "requested webhook redelivery", "delivery_id", f.GUID, "event", f.Event, "action", f.Action,
			"attempt_id", f.AttemptID, "status_code", f.StatusCode, "request", f.Requests)
		r.count(ResultRequested)
	case ResultGitHubRefused:
		r.logger.WarnContext(ctx, "GitHub refused a webhook redelivery; not retried", "delivery_id", f.GUID, "event", f.Event,
			"action", f.Action, "attempt_id", f.AttemptID, "detail", f.Detail)
		r.count(ResultGitHubRefused)
	default:
		r.logger.WarnContext(ctx, "webhook redelivery request failed; retried next scan", "delivery_id", f.GUID, "event", f.Event,
			"action", f.Action, "attempt_id", f.AttemptID, "err", f.Detail)
	}
	return stop
}

// mark records a guid skipped as rejected or given up on, counting it once.
func (r *Reconciler) mark(ctx context.Context, f *Finding, result string, dryRun bool, now time.Time) {
	if dryRun {
		return
	}
	_, err := r.q.RedeliveryMark(ctx, r.pool, dbq.RedeliveryMarkParams{
		Guid: f.GUID, Event: f.Event, Action: optional(f.Action), AttemptID: f.AttemptID,
		StatusCode: int32(f.StatusCode), Result: result, Now: now,
	})
	switch {
	case err == nil:
		r.count(result)
	case !errors.Is(err, pgx.ErrNoRows): // no row: already recorded
		r.logger.WarnContext(ctx, "record redelivery state", "delivery_id", f.GUID, "result", result, "err", err)
	}
}

func (r *Reconciler) count(result string) {
	if r.cfg.Metrics != nil {
		r.cfg.Metrics.Redelivery(result)
	}
}

// lock takes the scan lock on a connection of its own and returns its
// release; ok is false when another session holds it and wait is false.
func (r *Reconciler) lock(ctx context.Context, wait bool) (unlock func(), ok bool, err error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("take the redelivery scan lock: %w", err)
	}
	for {
		locked, err := r.q.RedeliveryTryLock(ctx, conn, redeliverLockKey)
		if err != nil {
			conn.Release()
			return nil, false, fmt.Errorf("take the redelivery scan lock: %w", err)
		}
		if locked {
			break
		}
		if !wait {
			conn.Release()
			return nil, false, nil
		}
		select {
		case <-ctx.Done():
			conn.Release()
			return nil, false, fmt.Errorf("wait for the redelivery scan running elsewhere: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return func() {
		// Released on a context of its own, so a cancelled scan still
		// frees the lock; a connection whose lock state is unknown is
		// closed rather than returned to the pool holding it.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := r.q.RedeliveryUnlock(uctx, conn, redeliverLockKey); err != nil {
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}, true, nil
}

// githubMessage shortens a go-github error to GitHub's message.
func githubMessage(err error) string {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return fmt.Sprintf("%d %s", er.Response.StatusCode, er.Message)
	}
	return strings.TrimSpace(err.Error())
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
