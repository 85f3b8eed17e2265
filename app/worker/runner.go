package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/gitlease/gitlease/app/worker/sandbox"
	"github.com/gitlease/gitlease/webhook"

	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// The part of a worker that is the same built in and remote: one job per
// leased item, which keeps its lease alive, waits for an issue item's
// branch, runs the command with the item in its environment, and finishes
// the item (complete, or release to pending) through the worker's leaser.

// provisionPoll is how often a job asks whether its issue item's branch and
// pull request exist yet.
const provisionPoll = 200 * time.Millisecond

// cancelKillAfter is the longest a command whose item was cancelled has
// between SIGTERM and the end of its sandbox: a cancel stops a command
// within seconds (SPEC §8.3), even one that ignores SIGTERM (as a shell that
// is the first process of its PID namespace does).
const cancelKillAfter = 2 * time.Second

// finishTimeout bounds the queue calls that finish a job (complete or
// release) in all, so a shutdown cannot hang on an unreachable queue.
const finishTimeout = 20 * time.Second

// Reasons a worker gives when it releases an item to pending; they go into
// the item's audit log.
const (
	// ReasonShutdown: the worker stopped before the command finished.
	ReasonShutdown = "shutdown"
	// ReasonRecoveredNoSlot: the sweeper recovered the item but the worker
	// had no free slot to resume it.
	ReasonRecoveredNoSlot = "recovered without a free slot"
	// reasonLeaseLostPrefix starts the reason of a job that lost its lease.
	reasonLeaseLostPrefix = "lease lost: "
)

// errShutdown is why a job stopped its command when the worker stopped
// and the grace period ran out.
var errShutdown = errors.New("worker shutting down")

// lostError is why a job stopped: the queue no longer counts its lease
// (the subject was closed, the lease expired, or another owner recovered it).
type lostError struct {
	Outcome queue.Outcome
	Reason  string
}

func (e *lostError) Error() string {
	return fmt.Sprintf("lease lost (%s): %s", e.Outcome, e.Reason)
}

// job runs one leased item.
type job struct {
	w        *Worker
	entryID  string
	dispatch json.RawMessage
	// traceParent is the item's trace (W3C), passed to the command as
	// TRACEPARENT; "" when the item has none.
	traceParent string
	meta        webhook.ItemMeta
	isGitHub    bool // the dispatch names a GitHub subject and the item came from a verified delivery, as far as the worker knows yet
	log         *slog.Logger

	mu    sync.Mutex
	fence queue.Fence

	lost     chan struct{} // closed when the lease is lost
	lostOnce sync.Once
	lostErr  *lostError

	renewNow chan struct{} // a coalesced "renew now": a cancel was committed

	// How the command ended, for the item's check run: its exit status
	// (nil when it did not run to an exit) and that in one line.
	exitCode  *int
	endReason string
}

// renewSoon asks the job to renew its lease now; it never blocks.
func (j *job) renewSoon() {
	select {
	case j.renewNow <- struct{}{}:
	default:
	}
}

func newJob(w *Worker, fe queue.FencedEntry) *job {
	j := &job{w: w, entryID: fe.Execution.QueueLease.EntryID, dispatch: fe.Entry.SubjectDispatch, traceParent: fe.Entry.TraceParent, fence: fe.Execution,
		lost: make(chan struct{}), renewNow: make(chan struct{}, 1)}
	j.meta, j.isGitHub = webhook.ReadMeta(fe.Entry.SubjectDispatch)
	attrs := []any{"entry_id", j.entryID, // owner_id comes with the worker's logger
		"lease_generation", fe.Execution.QueueLease.Generation, "workflow_id", fe.Execution.WorkflowID}
	if s := fe.Execution.Subject; s != nil {
		attrs = append(attrs, "qualified_id", s.QualifiedID, "generation", s.Generation)
	}
	j.log = w.logger.With(attrs...)
	return j
}

func (j *job) currentFence() queue.Fence {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fence
}

func (j *job) lose(outcome queue.Outcome, reason string) {
	j.lostOnce.Do(func() {
		j.lostErr = &lostError{Outcome: outcome, Reason: reason}
		close(j.lost)
	})
}

// run takes the item from lease to its end. It never returns before the
// command has exited.
func (j *job) run() {
	ctx := j.w.base
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		j.renewLoop(renewCtx)
	}()
	defer func() {
		stopRenew()
		<-renewed
	}()
	j.log.InfoContext(ctx, "work item started")

	err := j.checkOrigin(ctx)
	var prov *queue.Provisioning
	if err == nil {
		prov, err = j.awaitProvisioning(ctx)
	}
	if err == nil {
		var status, note string
		status, note, err = j.execute(ctx, prov)
		if err == nil {
			j.complete(ctx, status, note)
			return
		}
	}
	var lost *lostError
	switch {
	case errors.As(err, &lost) && lost.Reason == queue.ReasonSubjectClosed:
		// The queue already finished the item cancelled; nothing to do.
		j.log.InfoContext(ctx, "work item cancelled")
	case errors.As(err, &lost):
		// Usually another owner has the item now and this release is a
		// no-op; but if the lease only expired and nobody recovered it,
		// this puts it back to pending at once.
		j.log.WarnContext(ctx, "work item stopped: lease lost", "outcome", lost.Outcome, "reason", lost.Reason)
		j.release(ctx, reasonLeaseLostPrefix+lost.Reason)
	case errors.Is(err, errShutdown):
		j.release(ctx, ReasonShutdown)
	default:
		j.log.ErrorContext(ctx, "work item interrupted", "err", err)
		j.release(ctx, err.Error())
	}
}

// checkOrigin keeps isGitHub only for an item the webhook intake created
// from a verified delivery (docs/queue.md): a dispatch naming a GitHub subject
// over /rpc gets no installation token and waits for no branch. A remote
// worker has no store: it reads the origin off gitlease/entry/get's
// from_github in awaitProvisioning, and never mints tokens.
func (j *job) checkOrigin(ctx context.Context) error {
	if !j.isGitHub || j.w.store == nil {
		return nil
	}
	callCtx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	it, err := j.w.store.Get(callCtx, j.entryID)
	if err != nil {
		return fmt.Errorf("read the item's origin: %w", err)
	}
	j.isGitHub = it.FromGitHub()
	return nil
}

// renewEvery is the renew cadence: a third of the lease TTL, so two
// renewals in a row may fail before the lease expires.
func (j *job) renewEvery() time.Duration {
	if d := j.w.cfg.RenewEvery; d > 0 {
		return d
	}
	if j.w.ttl > 0 {
		return max(j.w.ttl/3, 100*time.Millisecond)
	}
	// A remote worker does not know the server's TTL: it reads it off the
	// lease, within bounds in case the clocks disagree.
	f := j.currentFence()
	return min(max(time.Until(f.QueueLease.ExpiresAt.Time)/3, time.Second), 10*time.Minute)
}

// renewLoop renews the lease until ctx ends or the lease is lost. A renew
// that gets no answer is retried sooner; any answer but applied loses the
// lease.
func (j *job) renewLoop(ctx context.Context) {
	every := j.renewEvery()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-j.renewNow:
			t.Stop()
		}
		callCtx, cancel := context.WithTimeout(ctx, min(rpcTimeout, every))
		res, err := j.w.q.Renew(callCtx, queue.RenewParams{Execution: j.currentFence()})
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			j.log.WarnContext(ctx, "lease renew failed; retrying", "err", err)
			t.Reset(min(every, 2*time.Second))
			continue
		case res.Outcome == queue.OutcomeApplied || res.Outcome == queue.OutcomeAlreadyApplied:
			if res.Execution != nil {
				j.mu.Lock()
				j.fence = *res.Execution
				j.mu.Unlock()
			}
			t.Reset(every)
		default:
			j.lose(res.Outcome, res.Reason)
			return
		}
	}
}

// awaitProvisioning waits, for an issue item from GitHub, until its branch
// and pull request are recorded, and returns them. An item the server says
// did not come from GitHub (from_github false: enqueued over /rpc or
// stdio) gets no branch, so it returns nil at once. It gives up waiting after
// ProvisionWait and returns nil: the command then runs without them (the
// outbox keeps trying; releasing would only lease the item again into the
// same wait). It returns a *lostError when the item moved on, errShutdown
// when the worker stops meanwhile.
func (j *job) awaitProvisioning(ctx context.Context) (*queue.Provisioning, error) {
	if !j.isGitHub || j.meta.Kind != webhook.KindIssue {
		return nil, nil
	}
	deadline := time.NewTimer(j.w.cfg.ProvisionWait)
	defer deadline.Stop()
	tick := time.NewTicker(provisionPoll)
	defer tick.Stop()
	for {
		callCtx, cancel := context.WithTimeout(ctx, rpcTimeout)
		v, err := j.w.q.Entry(callCtx, j.entryID)
		cancel()
		f := j.currentFence()
		switch {
		case rpc.IsNotFound(err):
			return nil, &lostError{Outcome: queue.OutcomeNotFound, Reason: "queue entry does not exist"}
		case err != nil:
			j.log.WarnContext(ctx, "reading the item's provisioning failed; retrying", "err", err)
		case v.Status == queue.StatusCancelled:
			return nil, &lostError{Outcome: queue.OutcomeNotAssigned, Reason: queue.ReasonSubjectClosed}
		case v.Status != queue.StatusAssigned || v.Execution == nil || v.Execution.QueueLease == nil ||
			v.Execution.QueueLease.Generation != f.QueueLease.Generation || v.Execution.QueueLease.OwnerID != f.QueueLease.OwnerID:
			return nil, &lostError{Outcome: queue.OutcomeStaleFence, Reason: "queue entry is " + v.Status + " under another lease"}
		case v.Provisioning != nil && v.Provisioning.Branch != "":
			return v.Provisioning, nil
		case v.FromGitHub != nil && !*v.FromGitHub:
			// Nobody provisions it (an older server does not say, and is
			// waited on as before).
			j.isGitHub = false
			return nil, nil
		}
		select {
		case <-j.lost:
			return nil, j.lostErr
		case <-j.w.stopping():
			return nil, errShutdown
		case <-deadline.C:
			j.log.WarnContext(ctx, "the item's branch and pull request are not provisioned yet; running without them",
				"waited", j.w.cfg.ProvisionWait.String())
			return nil, nil
		case <-tick.C:
		}
	}
}

// execute runs the command, if any, in a sandbox of its own, and returns
// the outcome to complete with and the output tail, masked. It returns a
// *lostError or errShutdown when it had to stop the command.
func (j *job) execute(ctx context.Context, prov *queue.Provisioning) (status, note string, err error) {
	cfg := j.w.cfg
	select {
	case <-j.lost:
		return "", "", j.lostErr
	default:
	}
	if cfg.Exec == "" {
		return queue.StatusCompleted, "", nil
	}
	select {
	case <-j.w.stopping():
		// Leased as the worker stopped: do not start what has no time to run.
		return "", "", errShutdown
	default:
	}
	// The command, and the item token minted for it, run in the item's trace.
	ctx, span := j.w.tracer.Start(queue.WithTraceParent(ctx, j.traceParent), "worker command")
	defer span.End()
	pass := cfg.PassEnv
	if j.w.remote {
		// A remote worker passes on the GITHUB_TOKEN of its own environment.
		pass = append(slices.Clone(pass), "GITHUB_TOKEN")
	}
	env := childEnv(cfg.Env, pass, itemEnv(j.currentFence(), j.dispatch, j.meta, prov))
	if tp := queue.TraceParent(ctx); tp != "" {
		// W3C trace context in the environment (OpenTelemetry's
		// environment-carrier convention): the command's own spans join the
		// item's trace.
		env = append(env, "TRACEPARENT="+tp)
	}
	secrets := passedValues(cfg.Env, pass)
	var tokenNote string
	// The built-in worker hands out a token minted for this item alone,
	// and only for an item from a verified delivery; a pull request from a
	// fork gets a read-only one.
	if j.w.gh != nil && j.isGitHub {
		tokCtx, cancel := context.WithTimeout(ctx, rpcTimeout)
		tok, revoke, err := j.w.gh.ItemToken(tokCtx, j.meta.InstallationID, j.meta.RepositoryID, j.meta.HeadInFork)
		cancel()
		if err != nil {
			// Run anyway: the command decides whether it can do without,
			// and what it prints explains a failure in the check run.
			j.log.WarnContext(ctx, "no installation token for the command", "installation_id", j.meta.InstallationID, "err", err)
			tokenNote = fmt.Sprintf("gitlease: no installation token (GITHUB_TOKEN) for this run: %v\n", err)
		} else {
			env = append(env, "GITHUB_TOKEN="+tok)
			secrets = append(secrets, tok)
			defer j.revoke(ctx, revoke)
		}
	}
	tail := newTailBuffer(cfg.OutputTail, newMasker(secrets))
	_, _ = io.WriteString(tail, tokenNote)
	// The command's context: ending it ends the whole sandbox.
	runCtx, endRun := context.WithCancel(context.WithoutCancel(ctx))
	defer endRun()
	p, err := j.w.sandbox.Start(runCtx, sandbox.Command{Script: cfg.Exec, Env: env, Dispatch: j.dispatch,
		Output: tail, WaitDelay: cfg.KillAfter})
	if err != nil {
		return queue.StatusFailed, tail.String() + fmt.Sprintf("gitlease: could not start the command: %v", err), nil
	}
	// Whatever the command left running ends with it, before its token is
	// revoked; then its room is removed.
	defer func() {
		if err := p.Close(); err != nil {
			j.log.WarnContext(ctx, "could not remove the command's room", "err", err)
		}
	}()
	j.log.InfoContext(ctx, "command started", "pid", p.Pid(), "sandbox", string(j.w.sandbox.Mode()))
	timeout := time.NewTimer(cfg.Timeout)
	defer timeout.Stop()
	// Progress stops before the job goes on to complete the item, so no
	// progress update follows its conclusion.
	defer j.showProgress(ctx, tail)()

	var graceOver <-chan time.Time
	stopping := j.w.stopping()
	for {
		select {
		case <-p.Done():
			return j.exited(ctx, p.Err(), tail)
		case <-timeout.C:
			j.log.WarnContext(ctx, "the command timed out; ending it", "timeout", cfg.Timeout.String())
			j.terminate(ctx, p, cfg.KillAfter)
			j.endReason = "Timed out after " + cfg.Timeout.String()
			return queue.StatusFailed, queue.NoteTimedOut + " after " + cfg.Timeout.String() + ": the command was ended\n" + tail.String(), nil
		case <-j.lost:
			// Cancelled (or taken over): stopped within seconds, whatever
			// the command does with SIGTERM.
			j.terminate(ctx, p, min(cfg.KillAfter, cancelKillAfter))
			return "", "", j.lostErr
		case <-stopping:
			stopping = nil
			t := time.NewTimer(cfg.Grace)
			defer t.Stop()
			graceOver = t.C
			j.log.InfoContext(ctx, "worker stopping: the command has a grace period to finish", "grace", cfg.Grace.String())
		case <-graceOver:
			j.terminate(ctx, p, cfg.KillAfter)
			return "", "", errShutdown
		}
	}
}

// showProgress copies the command's output tail to its check run every
// ProgressInterval while it runs, when it changed since the last copy
// shown; the next copy is due an interval after the last one ended, so two
// never reach GitHub closer than that. It returns the function that stops
// it and waits until it has.
func (j *job) showProgress(ctx context.Context, tail *tailBuffer) (stop func()) {
	every, sink := j.w.cfg.ProgressInterval, j.w.cfg.Progress
	if every <= 0 || sink == nil || !j.isGitHub {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(every)
		defer t.Stop()
		shown := ""
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if out := tail.String(); out != shown {
				callCtx, end := context.WithTimeout(ctx, min(every, rpcTimeout))
				ok, err := sink.Show(callCtx, j.entryID, out)
				end()
				switch {
				case err != nil && ctx.Err() == nil:
					j.log.WarnContext(ctx, "could not show the command's progress on its check run", "err", err)
				case ok:
					shown = out
				}
			}
			t.Reset(every)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// revoke revokes the command's token, on a context of its own: the token
// must die with the command even when the worker is stopping.
func (j *job) revoke(ctx context.Context, revoke func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rpcTimeout)
	defer cancel()
	if err := revoke(ctx); err != nil {
		j.log.WarnContext(ctx, "could not revoke the command's installation token; it expires within the hour", "err", err)
	}
}

// exited turns the command's exit into an outcome.
func (j *job) exited(ctx context.Context, werr error, tail *tailBuffer) (status, note string, err error) {
	var exitErr *exec.ExitError
	switch {
	case werr == nil || errors.Is(werr, exec.ErrWaitDelay):
		j.log.InfoContext(ctx, "command succeeded")
		j.exitCode, j.endReason = new(int), "Command exited 0"
		return queue.StatusCompleted, tail.String(), nil
	case errors.As(werr, &exitErr):
		j.log.InfoContext(ctx, "command failed", "exit", exitErr.ExitCode(), "status", exitErr.String())
		fmt.Fprintf(tail, "\ngitlease: the command ended with %s\n", exitErr.String())
		if code := exitErr.ExitCode(); code >= 0 {
			j.exitCode, j.endReason = &code, fmt.Sprintf("Command exited %d", code)
		} else {
			j.endReason = "Command ended: " + exitErr.String() // killed by a signal
		}
	default:
		j.log.WarnContext(ctx, "waiting for the command failed", "err", werr)
		fmt.Fprintf(tail, "\ngitlease: %v\n", werr)
	}
	return queue.StatusFailed, tail.String(), nil
}

// terminate stops the command: SIGTERM to its processes, then, if it has
// not exited after killAfter, the end of everything in its sandbox. It
// returns once the command has exited.
func (j *job) terminate(ctx context.Context, p *sandbox.Process, killAfter time.Duration) {
	j.log.InfoContext(ctx, "stopping the command", "pid", p.Pid())
	p.Signal(syscall.SIGTERM)
	t := time.NewTimer(killAfter)
	defer t.Stop()
	select {
	case <-p.Done():
		p.Kill() // what it left behind
		return
	case <-t.C:
	}
	j.log.WarnContext(ctx, "the command ignored SIGTERM; killing it", "pid", p.Pid())
	p.Kill()
	<-p.Done()
}

// complete records the outcome, retrying a call that got no answer.
func (j *job) complete(ctx context.Context, status, note string) {
	res, err := j.finish(ctx, "complete", func(ctx context.Context) (queue.MutationResult, error) {
		return j.w.q.Complete(ctx, queue.CompleteParams{Execution: j.currentFence(), Status: status, Note: note,
			EndReason: j.endReason, ExitCode: j.exitCode})
	})
	switch {
	case err != nil:
		// The lease expires and is recovered: the work runs again.
		j.log.ErrorContext(ctx, "could not record the outcome", "status", status, "err", err)
	case (res.Outcome == queue.OutcomeApplied || res.Outcome == queue.OutcomeAlreadyApplied) && j.w.remote && note != "":
		// Completion over /rpc carries no note: the output tail is only here.
		j.log.InfoContext(ctx, "work item finished", "status", status, "output_tail", note)
	case res.Outcome == queue.OutcomeApplied || res.Outcome == queue.OutcomeAlreadyApplied:
		j.log.InfoContext(ctx, "work item finished", "status", status)
	default:
		j.log.WarnContext(ctx, "outcome not recorded: the item moved on", "status", status, "outcome", res.Outcome, "reason", res.Reason)
	}
}

// release returns the item to pending, retrying a call that got no answer.
func (j *job) release(ctx context.Context, reason string) {
	res, err := j.finish(ctx, "release", func(ctx context.Context) (queue.MutationResult, error) {
		return j.w.q.ReleasePending(ctx, queue.ReleasePendingParams{Execution: j.currentFence(), Reason: reason})
	})
	switch {
	case err != nil:
		j.log.ErrorContext(ctx, "could not release the item to pending", "reason", reason, "err", err)
	case res.Outcome == queue.OutcomeApplied || res.Outcome == queue.OutcomeAlreadyApplied:
		j.log.InfoContext(ctx, "work item released to pending", "reason", reason)
	default:
		j.log.DebugContext(ctx, "release not applied: the item moved on", "outcome", res.Outcome, "reason", res.Reason)
	}
}

// finishBackoff paces the retries of a finishing call: from 250 ms,
// doubling, at most 4 s apart.
func finishBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 4 * time.Second}
}

// finish runs a finishing call with retries, within finishTimeout in all.
// The context is never the worker's stop signal: a stopping worker must
// still record what its commands did.
func (j *job) finish(ctx context.Context, what string, call func(context.Context) (queue.MutationResult, error)) (queue.MutationResult, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	var last error
	res, err := backoff.Retry(ctx, func() (queue.MutationResult, error) {
		res, err := call(ctx)
		var (
			invalid *queue.InvalidError
			rpcErr  *rpc.Error
		)
		if err == nil || errors.As(err, &invalid) || (errors.As(err, &rpcErr) && rpcErr.Code != rpc.CodeInternal) {
			return res, backoff.Permanent(err) // an answer: asking again changes nothing
		}
		last = err
		j.log.WarnContext(ctx, what+" failed; retrying", "err", err)
		return res, err
	}, backoff.WithBackOff(finishBackoff()), backoff.WithMaxElapsedTime(0))
	if err != nil && ctx.Err() != nil && last != nil {
		return res, fmt.Errorf("%s work item: %w", what, last)
	}
	return res, err
}
