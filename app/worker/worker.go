package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/app/worker/sandbox"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// BuiltinOwnerPrefix starts the owner ID of every built-in worker
// ("gitlease-serve/<instance>"). The Sweeper recovers expired leases of
// these owners only; an outside worker must not use the prefix.
const BuiltinOwnerPrefix = "gitlease-serve/"

// NotifyChannel is the Postgres channel a trigger notifies whenever a work
// item becomes pending (created, or released back).
const NotifyChannel = "gitlease_work"

// CancelChannel is the Postgres channel notified after a commit that asked
// assigned items to stop (queue.Config.OnCancel): every built-in worker
// listening renews its running items at once, and a renew that finds its
// item cancelled stops the command, within seconds on any instance.
const CancelChannel = "gitlease_cancel"

// MaxWorkerSlots is the most items one worker runs at once.
const MaxWorkerSlots = queue.MaxLeaseBatch

// WorkerConfig configures a Worker. Zero fields take the defaults shown.
type WorkerConfig struct {
	// Slots is how many items run at once, 1..5 (GITLEASE_WORKER_SLOTS).
	Slots int
	// Exec is the shell command (sh -c) run per item (GITLEASE_WORKER_EXEC).
	// Empty: each item completes once provisioned.
	Exec string
	// OwnerID is the lease owner: gitlease-serve/<instance> for the
	// built-in worker. Required.
	OwnerID string
	// Poll is how long the worker waits for a wake-up (a NOTIFY, a freed
	// slot) before it tries to lease anyway; 5s.
	Poll time.Duration
	// ProvisionWait is how long an issue item waits for its branch and
	// pull request before its command runs without them; 30m. The outbox
	// keeps retrying a failed GitHub write every 30 s at most, so under
	// GitHub trouble the item waits, renewing its lease, rather than finish
	// without the branch its check run would sit on.
	ProvisionWait time.Duration
	// Grace is how long running commands may go on finishing after the
	// worker starts to stop; 25s. Later they are stopped and their items
	// released to pending.
	Grace time.Duration
	// KillAfter is how long a stopped command has between SIGTERM and
	// SIGKILL; 5s.
	KillAfter time.Duration
	// OutputTail is how many bytes of a command's combined output are kept
	// as the item's note (shown in its check run); 4 KiB.
	OutputTail int
	// RenewEvery overrides the renew cadence, a third of the lease TTL.
	RenewEvery time.Duration
	// Env is the environment commands take their allow-listed variables
	// from (PATH, HOME, LANG, LC_ALL, LC_CTYPE, TZ, TMPDIR and PassEnv);
	// os.Environ() when nil.
	Env []string
	// PassEnv names further variables of Env passed on to commands
	// (GITLEASE_WORKER_ENV), such as an agent's API key.
	PassEnv []string
	// User, if set, is the OS user (name or uid) commands run as, with its
	// groups (GITLEASE_WORKER_USER); switching user needs root.
	User string
	// Sandbox is how commands are isolated (GITLEASE_WORKER_SANDBOX);
	// sandbox.Auto when empty.
	Sandbox sandbox.Mode
	// Hide lists the server's paths no command may see (its working
	// directory, the …_FILE secrets).
	Hide []string
	// Timeout is the longest a command runs before it is ended and its
	// item fails (GITLEASE_WORKER_TIMEOUT); 1h.
	Timeout time.Duration
	// TracerProvider, if set, makes each command's run (its item token and
	// the command itself) a "worker command" span in its item's trace, and
	// the command's TRACEPARENT that span. Nil: no span; TRACEPARENT is the
	// item's own trace parent.
	TracerProvider trace.TracerProvider
	// Progress, if set, shows a running command's output tail on its
	// item's check run, at most every ProgressInterval
	// (GITLEASE_PROGRESS_INTERVAL; 0 turns it off) and only when it
	// changed. Only items from verified deliveries have one.
	Progress         ProgressSink
	ProgressInterval time.Duration
}

// ProgressSink shows a running command's output on GitHub (cmd fills it
// with app/outbox's Progress). Show reports whether it did: false with no
// error when it skipped the update (its writes yield to every other), and
// the job tries again at its next interval.
type ProgressSink interface {
	Show(ctx context.Context, entryID, output string) (bool, error)
}

func (c *WorkerConfig) defaults() {
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
	if c.Poll <= 0 {
		c.Poll = 5 * time.Second
	}
	if c.ProvisionWait <= 0 {
		c.ProvisionWait = 30 * time.Minute
	}
	if c.Grace <= 0 {
		c.Grace = 25 * time.Second
	}
	if c.KillAfter <= 0 {
		c.KillAfter = 5 * time.Second
	}
	if c.OutputTail <= 0 {
		c.OutputTail = 4 << 10
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Hour
	}
}

func (c *WorkerConfig) validate() error {
	if c.Slots < 1 || c.Slots > MaxWorkerSlots {
		return fmt.Errorf("worker slots must be 1..%d, not %d", MaxWorkerSlots, c.Slots)
	}
	if strings.TrimSpace(c.OwnerID) == "" {
		return errors.New("worker owner ID must not be blank")
	}
	return nil
}

// Worker leases work items into free slots and runs each: it keeps the
// lease renewed, waits for an issue item's branch and pull request, runs
// Exec with the item in its environment, and completes the item from the
// exit status (or stops the command when the queue says the item was
// cancelled). The built-in worker (NewWorker) leases from the Store and
// wakes on Postgres NOTIFY; the remote one (NewRemoteWorker) leases over
// /rpc and polls. It is safe for concurrent use.
type Worker struct {
	q     leaser
	ttl   time.Duration         // the lease TTL, when known (built-in)
	pool  *pgxpool.Pool         // for LISTEN; nil for a remote worker
	gh    *github.Installations // installation tokens; nil: none
	store *queue.Store          // the built-in worker's, for an item's origin; nil for a remote worker
	user  *commandUser          // commands run as; nil: this process's user
	// sandbox starts the commands; nil without a command.
	sandbox *sandbox.Sandbox
	remote  bool
	cfg     WorkerConfig
	logger  *slog.Logger

	tracer trace.Tracer
	wake   chan struct{} // a coalesced "try to lease now"

	// leaseMu serialises taking slots (a lease call, Resume), so the two
	// never fill the same free slot.
	leaseMu sync.Mutex

	// leasing runs the lease and LISTEN loops; its Stopping channel is
	// what running jobs watch for the shutdown's grace period.
	leasing service.Service

	mu      sync.Mutex
	started bool
	stopped bool
	busy    int             // slots taken by running jobs
	running map[string]bool // entry IDs with a job
	jobsBy  map[string]*job // the running jobs by entry ID, once started

	stopCancels context.CancelFunc // ends the cancel listener, after the jobs
	cancels     chan struct{}      // closed when the cancel listener has ended
	base        context.Context    // never cancelled by Stop: jobs' queue calls
	jobs        sync.WaitGroup
}

// NewWorker returns the built-in worker: it leases from store, wakes on
// NOTIFY gitlease_work over a connection of its own made with pool's
// settings, and gives commands an installation token as GITHUB_TOKEN when gh
// is not nil. It returns an error for an invalid cfg (slots outside 1..5, no
// owner ID).
func NewWorker(store *queue.Store, pool *pgxpool.Pool, gh *github.Installations, cfg WorkerConfig, logger *slog.Logger) (*Worker, error) {
	w, err := newWorker(storeLeaser{store}, cfg, logger)
	if err != nil {
		return nil, err
	}
	w.ttl, w.pool, w.gh, w.store = store.LeaseTTL(), pool, gh, store
	return w, nil
}

// NewRemoteWorker returns a worker that leases over /rpc through client,
// as `gitlease worker` does. It polls for work every cfg.Poll. Commands get
// no installation token: GITHUB_TOKEN passes through from cfg.Env. Output
// tails are logged, not sent (completion over /rpc carries no note). It
// returns an error for an invalid cfg, and for an owner ID under
// BuiltinOwnerPrefix, which the sweepers of serve would take over.
func NewRemoteWorker(client *rpc.Client, cfg WorkerConfig, logger *slog.Logger) (*Worker, error) {
	if strings.HasPrefix(cfg.OwnerID, BuiltinOwnerPrefix) {
		return nil, fmt.Errorf("worker owner ID %q must not start with %q: that prefix is for serve's built-in workers", cfg.OwnerID, BuiltinOwnerPrefix)
	}
	w, err := newWorker(client, cfg, logger)
	if err != nil {
		return nil, err
	}
	w.remote = true
	return w, nil
}

func newWorker(q leaser, cfg WorkerConfig, logger *slog.Logger) (*Worker, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Worker{q: q, cfg: cfg, logger: logger.With("owner_id", cfg.OwnerID), tracer: cfg.TracerProvider.Tracer("github.com/gitlease/gitlease/app/worker"),
		wake: make(chan struct{}, 1), running: map[string]bool{}, jobsBy: map[string]*job{}}
	if cfg.User != "" {
		u, err := lookupCommandUser(cfg.User)
		if err != nil {
			return nil, err
		}
		w.user = u
	}
	if cfg.Exec != "" {
		scfg := sandbox.Config{Mode: cfg.Sandbox, Hide: cfg.Hide}
		if w.user != nil {
			scfg.Cred = w.user.cred
		}
		sb, err := sandbox.New(scfg)
		if err != nil {
			return nil, err
		}
		w.sandbox = sb
	}
	return w, nil
}

// NewInstanceID names this process among the instances sharing a database:
// the host name and a random suffix, so a restarted process never takes
// over the leases of the one before it.
func NewInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	host = strings.Map(func(r rune) rune {
		if r == '/' || r <= ' ' {
			return '-'
		}
		return r
	}, host)
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return host + "-" + hex.EncodeToString(b[:])
}

// OwnerID is the lease owner the worker leases as.
func (w *Worker) OwnerID() string { return w.cfg.OwnerID }

// Start starts leasing in the background and returns once it is set up:
// for the built-in worker, once it listens for NOTIFY (if Postgres does not
// answer it retries in the background, and polls meanwhile). Leasing stops
// when ctx ends or at StopLeasing or Stop; running commands then get the
// grace period. Queue calls that finish items do not use ctx's
// cancellation. It returns an error if the worker was started or stopped
// before.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.stopped {
		return errors.New("worker already started or stopped")
	}
	w.started = true
	w.base = context.WithoutCancel(ctx)
	var conn, cancelConn *pgx.Conn
	l, cl := w.listener(), w.cancelListener()
	if w.pool != nil {
		var err error
		if conn, err = l.Connect(ctx); err != nil {
			w.logger.WarnContext(ctx, "cannot listen for new work yet; polling meanwhile", "err", err)
		}
		if cancelConn, err = cl.Connect(ctx); err != nil {
			w.logger.WarnContext(ctx, "cannot listen for cancels yet; running items learn of them at their next renew", "err", err)
		}
	}
	if err := w.leasing.Start(ctx, func(ctx context.Context) {
		listenDone := make(chan struct{})
		go func() {
			defer close(listenDone)
			if w.pool != nil {
				l.Run(ctx, conn)
			}
		}()
		w.leaseLoop(ctx)
		<-listenDone
	}); err != nil {
		return err
	}
	// Cancels are heard until the jobs have ended, not only while leasing:
	// a command in its grace period may be cancelled too.
	cctx, stopCancels := context.WithCancel(w.base)
	w.cancels = make(chan struct{})
	w.stopCancels = stopCancels
	go func() {
		defer close(w.cancels)
		if w.pool != nil {
			cl.Run(cctx, cancelConn)
		}
	}()
	w.logger.InfoContext(ctx, "worker started", "slots", w.cfg.Slots, "exec", w.cfg.Exec != "")
	return nil
}

// StopLeasing stops taking new work and starts the grace period of running
// commands, without waiting. Stop finishes the shutdown.
func (w *Worker) StopLeasing() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.leasing.Cancel()
}

// Stop stops leasing and waits until every job has ended: commands that
// finish within the grace period complete their items normally; the others
// are stopped (SIGTERM, then SIGKILL) and their items released to pending
// (reason "shutdown") so another worker can take them at once. It is safe
// to call more than once, or before Start.
func (w *Worker) Stop() {
	w.StopLeasing()
	w.leasing.Stop()
	w.jobs.Wait()
	w.mu.Lock()
	stop, done := w.stopCancels, w.cancels
	w.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	if w.sandbox != nil {
		if err := w.sandbox.Close(); err != nil {
			w.logger.Warn("could not remove the commands' rooms", "err", err)
		}
	}
}

// Resume runs an item this worker's owner ID holds (the Sweeper recovered
// it to this worker) if a slot is free. It reports false, and does nothing,
// when no slot is free, the item already runs here, or the worker is not
// running; the caller then releases the item.
func (w *Worker) Resume(fe queue.FencedEntry) bool {
	if fe.Execution.QueueLease == nil || fe.Execution.QueueLease.OwnerID != w.cfg.OwnerID {
		return false
	}
	id := fe.Execution.QueueLease.EntryID
	w.leaseMu.Lock() // waits for a lease call in flight to take its slots
	defer w.leaseMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.stopped || w.busy >= w.cfg.Slots || w.running[id] {
		return false
	}
	select {
	case <-w.stopping(): // the context given to Start has ended
		return false
	default:
	}
	w.busy++
	w.running[id] = true
	w.jobs.Add(1)
	go w.run(fe)
	return true
}

// Running reports whether an item runs in this worker now.
func (w *Worker) Running(entryID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.running[entryID]
}

// stopping is closed once leasing stops.
func (w *Worker) stopping() <-chan struct{} { return w.leasing.Stopping() }

func (w *Worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// leaseLoop leases into free slots whenever something may have changed:
// at start, on NOTIFY, when a slot frees, and every Poll.
func (w *Worker) leaseLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
		next := w.cfg.Poll
		if err := w.leaseOnce(ctx); err != nil && ctx.Err() == nil {
			w.logger.ErrorContext(ctx, "lease failed", "err", err)
			next = min(next, 5*time.Second)
		}
		t.Reset(next) // since Go 1.23, Reset leaves no stale tick behind
	}
}

// leaseOnce leases at most the free slots' worth of items and starts a job
// for each.
func (w *Worker) leaseOnce(ctx context.Context) error {
	w.leaseMu.Lock()
	defer w.leaseMu.Unlock()
	w.mu.Lock()
	free := w.cfg.Slots - w.busy // only grows until leaseMu is released
	w.mu.Unlock()
	if free <= 0 || ctx.Err() != nil {
		return nil
	}

	ids := make([]string, free)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	// The call runs to its end even if leasing stops meanwhile: a lease
	// that committed must reach a job, which then releases it.
	callCtx, cancel := context.WithTimeout(w.base, rpcTimeout)
	res, err := w.q.Lease(callCtx, queue.LeaseParams{Max: free, OwnerID: w.cfg.OwnerID, WorkflowIDs: ids})
	cancel()

	w.mu.Lock()
	w.busy += len(res.Leased)
	for _, fe := range res.Leased {
		w.running[fe.Execution.QueueLease.EntryID] = true
		w.jobs.Add(1)
	}
	w.mu.Unlock()
	for _, fe := range res.Leased {
		go w.run(fe)
	}
	if err != nil {
		return fmt.Errorf("lease work items: %w", err)
	}
	return nil
}

// run runs one job and frees its slot.
func (w *Worker) run(fe queue.FencedEntry) {
	id := fe.Execution.QueueLease.EntryID
	j := newJob(w, fe)
	w.mu.Lock()
	w.jobsBy[id] = j
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.busy--
		delete(w.running, id)
		delete(w.jobsBy, id)
		w.mu.Unlock()
		w.poke()
		w.jobs.Done()
	}()
	j.run()
}

// renewRunning makes every running job renew its lease now: a cancel was
// committed somewhere, and the renew of a cancelled item tells its job to
// stop the command.
func (w *Worker) renewRunning() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, j := range w.jobsBy {
		j.renewSoon()
	}
}

// listener wakes the lease loop on every NOTIFY gitlease_work.
func (w *Worker) listener() *service.Listener {
	return &service.Listener{Pool: w.pool, Channel: NotifyChannel, Wake: w.poke, Logger: w.logger}
}

// cancelListener renews the running items on every NOTIFY gitlease_cancel.
func (w *Worker) cancelListener() *service.Listener {
	return &service.Listener{Pool: w.pool, Channel: CancelChannel, Wake: w.renewRunning, Logger: w.logger}
}
