package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/webhook"

	gh "github.com/google/go-github/v66/github"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// SenderConfig configures the outbox Sender. Zero fields take defaults.
type SenderConfig struct {
	Batch      int           // rows claimed per round; 10
	Poll       time.Duration // longest wait between rounds when idle (NOTIFY and due rows wake it sooner); 1s
	LockFor    time.Duration // how long a claim keeps other senders off a row; 1m
	MaxBackoff time.Duration // longest wait between retries of a failed write; 30s
	// PublicURL (GITLEASE_PUBLIC_URL), if set, makes each item's check run
	// link to its dashboard page, <PublicURL>/ui/items/<entry_id>.
	PublicURL string
	Now       func() time.Time
	// TracerProvider, if set, makes each row's send an "outbox send KIND"
	// span in the trace the row names (its trace_parent), parent of the
	// GitHub calls it makes. Nil: no spans.
	TracerProvider trace.TracerProvider
}

func (c *SenderConfig) defaults() {
	if c.Batch <= 0 {
		c.Batch = 10
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.LockFor <= 0 {
		// A row's work is cut off at three quarters of it (its calls, their
		// in-place retries and waits for a write's turn); short enough that
		// a killed sender's claims free up soon.
		c.LockFor = time.Minute
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
}

// Sender drains the GitHub outbox: it claims due rows (first in their lane,
// SKIP LOCKED, so any number of senders in any number of processes share one
// outbox), performs each write idempotently, and marks it done, retries it
// with backoff and jitter (honouring Retry-After and the rate-limit reset),
// or records a permanent failure.
type Sender struct {
	pool   *pgxpool.Pool
	q      *dbq.Queries
	gh     *github.Installations
	cfg    SenderConfig
	logger *slog.Logger
	wake   chan struct{}
	tracer trace.Tracer

	service.Service
}

// NewSender returns a Sender writing to GitHub through gh.
func NewSender(pool *pgxpool.Pool, gh *github.Installations, cfg SenderConfig, logger *slog.Logger) *Sender {
	cfg.defaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Sender{pool: pool, q: dbq.New(), gh: gh, cfg: cfg, logger: logger, wake: make(chan struct{}, 1),
		tracer: cfg.TracerProvider.Tracer("github.com/gitlease/gitlease/app/outbox")}
}

// Start runs the sender in the background until Stop or ctx ends. It
// listens on OutboxChannel, so rows committed by any process wake it at
// once; without the LISTEN connection it polls (and retries listening).
func (s *Sender) Start(ctx context.Context) error {
	return s.Service.Start(ctx, func(ctx context.Context) {
		l := &service.Listener{Pool: s.pool, Channel: OutboxChannel, Wake: s.poke, Logger: s.logger}
		conn, err := l.Connect(ctx)
		if err != nil {
			s.logger.WarnContext(ctx, "cannot listen for outbox rows yet; polling meanwhile", "err", err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.Run(ctx, conn)
		}()
		s.loop(ctx)
		<-done
	})
}

// poke wakes the loop; it never blocks.
func (s *Sender) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Sender) loop(ctx context.Context) {
	for {
		n, err := s.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "outbox round failed", "err", err)
		}
		if n > 0 {
			// More may be due right away: the rest of a batch, or a
			// check run whose branch this round provisioned.
			continue
		}
		wait := s.cfg.Poll
		now := s.cfg.Now()
		// No row given back for later: err is NULL's scan error, and the
		// poll (or a NOTIFY) wakes it.
		if next, err := s.q.OutboxNextRetry(ctx, s.pool, now); err == nil {
			wait = min(wait, max(next.Sub(now), time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// RunOnce claims one batch of due rows and processes them, returning how
// many it claimed.
func (s *Sender) RunOnce(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	rows, err := s.q.OutboxClaimBatch(ctx, s.pool, dbq.OutboxClaimBatchParams{
		LockUntil: now.Add(s.cfg.LockFor), Now: now, Batch: int32(s.cfg.Batch),
	})
	if err != nil {
		return 0, fmt.Errorf("claim outbox rows: %w", err)
	}
	var wg sync.WaitGroup
	for _, row := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The row's work ends well before its claim does, so no other
			// sender ever takes it up while this one still writes.
			rctx, cancel := context.WithTimeout(ctx, s.cfg.LockFor*3/4)
			defer cancel()
			rctx, span := s.tracer.Start(queue.WithTraceParent(rctx, dbq.Deref(row.TraceParent)), "outbox send "+row.Kind,
				trace.WithAttributes(attribute.Int64("gitlease.outbox.id", row.ID), attribute.Int("gitlease.outbox.attempt", int(row.Attempts))))
			defer span.End()
			var at attempt
			err := s.process(rctx, row, &at)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "GitHub write failed")
			}
			s.settle(rctx, row, &at, err)
		}()
	}
	wg.Wait()
	return len(rows), nil
}

// process performs one row, recording in at whether one of its steps got
// through (so its backoff starts over if a later step fails) and what
// GitHub answered.
func (s *Sender) process(ctx context.Context, row dbq.Outbox, at *attempt) error {
	switch row.Kind {
	case kindCheckRun:
		return s.sendCheckRun(ctx, row, at)
	case kindProvision:
		return s.provision(ctx, row, at)
	case kindStandalone:
		return s.sendStandalone(ctx, row, at)
	}
	return &github.PermanentError{Err: fmt.Errorf("unknown outbox kind %q", row.Kind)}
}

// settle records the outcome of one row and GitHub's answers to it (at;
// at.made says a step got through).
func (s *Sender) settle(ctx context.Context, row dbq.Outbox, at *attempt, err error) {
	now := s.cfg.Now()
	log := s.logger.With("outbox_id", row.ID, "kind", row.Kind, "attempt", row.Attempts)
	if row.EntryID != nil {
		log = log.With("entry_id", row.EntryID.String())
	}
	// Settle even if ctx was cancelled mid-write: the claim must not linger.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	at.failed(err)
	answer := at.answer()
	var dbErr error
	if err == nil {
		dbErr = s.q.OutboxDone(sctx, s.pool, dbq.OutboxDoneParams{ID: row.ID, Now: now, LastAnswer: answer})
	} else if retryAt, permanent := s.retryAt(row, at.made, err, now); permanent {
		log.ErrorContext(ctx, "GitHub write failed permanently", "err", err)
		dbErr = s.q.OutboxFail(sctx, s.pool, dbq.OutboxFailParams{ID: row.ID, Now: now, LastError: new(err.Error()), LastAnswer: answer})
	} else if at.made {
		log.WarnContext(ctx, "GitHub write will be resumed", "err", err, "retry_at", retryAt)
		dbErr = s.q.OutboxRetryAfterProgress(sctx, s.pool, dbq.OutboxRetryAfterProgressParams{ID: row.ID, AvailableAt: retryAt, LastError: new(err.Error()), LastAnswer: answer})
	} else {
		log.WarnContext(ctx, "GitHub write will be retried", "err", err, "retry_at", retryAt)
		dbErr = s.q.OutboxRetry(sctx, s.pool, dbq.OutboxRetryParams{ID: row.ID, AvailableAt: retryAt, LastError: new(err.Error()), LastAnswer: answer})
	}
	if dbErr != nil {
		log.ErrorContext(ctx, "could not settle outbox row; its claim will expire", "err", dbErr)
	}
}

// retryAt decides when a failed write is tried again, or that it never is
// (github.Classify): a rate limit holds it until the limit lifts; anything
// else not permanent backs off, exponentially from 250 ms with jitter and
// capped, counting the attempts since the row last made progress (none
// when made).
func (s *Sender) retryAt(row dbq.Outbox, made bool, err error, now time.Time) (time.Time, bool) {
	v := github.Classify(err, now)
	switch {
	case v.Permanent:
		return time.Time{}, true
	case !v.Until.IsZero():
		return v.Until, false
	}
	// The cap stays low because a write makes several calls and each retry
	// resumes from what exists: under a steady share of failures a row must
	// keep trying, not drift minutes apart.
	since := 1
	if !made {
		since = max(int(row.Attempts-row.ProgressAttempts), 1)
	}
	return now.Add(rowBackoff(since, s.cfg.MaxBackoff)), false
}

// rowBackoff is the pause before a row's nth retry since its last progress.
func rowBackoff(n int, maxBackoff time.Duration) time.Duration {
	b := github.BackOff(250*time.Millisecond, maxBackoff)
	var d time.Duration
	for range min(n, 32) {
		d = b.NextBackOff()
	}
	return min(d, maxBackoff)
}

// target is what a row's write is about: the work item, what GitHub holds
// for it, where it lives on GitHub and the client to reach it.
type target struct {
	w   queue.Item
	g   dbq.GithubItem
	m   webhook.ItemMeta
	c   *gh.Client
	end queue.Ending
}

// targetOf loads the row's work item, its GitHub record and its client.
func (s *Sender) targetOf(ctx context.Context, row dbq.Outbox) (target, error) {
	var t target
	if row.EntryID == nil {
		return t, &github.PermanentError{Err: errors.New("outbox row has no entry")}
	}
	var err error
	if t.w, err = queue.ReadItem(ctx, s.pool, *row.EntryID); err != nil {
		return t, err
	}
	if t.g, err = itemState(ctx, s.q, s.pool, t.w.ID()); err != nil {
		return t, err
	}
	if t.end, err = queue.ReadEnding(ctx, s.pool, t.w.ID()); err != nil {
		return t, err
	}
	var ok bool
	if t.m, ok = itemMeta(t.w); !ok {
		return t, &github.PermanentError{Err: errors.New("work item has no GitHub metadata, or did not come from a verified delivery")}
	}
	if t.c, err = s.gh.Client(t.m.InstallationID); err != nil {
		return t, &github.PermanentError{Err: err}
	}
	return t, nil
}

func decodePayload(row dbq.Outbox, v any) error {
	if err := json.Unmarshal(row.Payload, v); err != nil {
		return &github.PermanentError{Err: fmt.Errorf("decode outbox payload: %w", err)}
	}
	return nil
}
