package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/webhook"
)

// Options are the load tool's settings; see the flags in main.go.
type Options struct {
	URL         string
	Secret      string
	Concurrency int
	// Count and Duration bound the run; whichever is reached first ends it.
	// At least one is set.
	Count    int
	Duration time.Duration
	// Replay and Collide are the shares of requests that resend an earlier
	// delivery, and that are a new delivery about a subject with a live
	// item.
	Replay, Collide float64
	// Rate caps requests per second over all workers; 0 means no cap.
	Rate float64
	// DSN is the database serve uses: for the end check and the baseline.
	DSN  string
	Seed uint64
	// Baseline runs only the plain-insert floor; Compare runs the floor,
	// then the HTTP load, and prints the ratio.
	Baseline, Compare bool
	// PID is serve's process ID, for its memory and CPU; 0 for none.
	PID int
	// Timeout bounds one HTTP request.
	Timeout time.Duration
	// Repos is how many repositories the subjects are spread over.
	Repos int
	// BodySize is what issue and pull request bodies are padded to.
	BodySize int
	// PGWaits samples pg_stat_activity on DSN during each phase and
	// reports where the database's backends spent it.
	PGWaits bool
}

// Report is everything a run measured and checked.
type Report struct {
	HTTP     *Stats
	Baseline *Stats
	// Ideal and IdealProc are the ideal receiver's run and its process
	// (--compare).
	Ideal     *Stats
	IdealProc *ProcStats
	// Sent counts the HTTP requests by why they were sent: "fresh",
	// "replay", "collide".
	Sent map[string]int
	Proc *ProcStats
	// HTTPWaits and BaselineWaits are the PostgreSQL wait profiles of the
	// phases, with Options.PGWaits.
	HTTPWaits, BaselineWaits *WaitProfile
	// Checks are the database checks, when Options.DSN was set.
	Checks []Check
}

// Failed reports whether a database check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return true
		}
	}
	return false
}

// Ratio is the HTTP throughput as a fraction of the baseline's, 0 when
// either is missing.
func (r *Report) Ratio() float64 {
	if r.HTTP == nil || r.Baseline == nil || r.Baseline.Throughput() == 0 {
		return 0
	}
	return r.HTTP.Throughput() / r.Baseline.Throughput()
}

// runError is an error that can be a constant.
type runError string

func (e runError) Error() string { return string(e) }

// ErrCheckFailed is returned by Run when the load ran but a database check
// failed. It is a constant: the package keeps no mutable state.
const ErrCheckFailed = runError("database check failed")

// Run runs what opts asks (baseline, HTTP load, or both), writes the report
// to out and returns it. The error is ErrCheckFailed when a database check
// failed, another error when the run could not be carried out.
func Run(ctx context.Context, opts Options, out io.Writer) (*Report, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	run, repoBase, err := runIdentity()
	if err != nil {
		return nil, err
	}
	gen, err := newGenerator(opts.Seed, run, repoBase, opts.Repos, opts.BodySize)
	if err != nil {
		return nil, fmt.Errorf("make payload templates: %w", err)
	}
	rep := &Report{}
	if opts.Baseline || opts.Compare {
		ws, err := startWaits(ctx, opts)
		if err != nil {
			return nil, err
		}
		rep.Baseline, err = runBaseline(ctx, opts, gen)
		rep.BaselineWaits = stopWaits(ws, out)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		rep.Baseline.Print(out)
		if rep.BaselineWaits != nil {
			rep.BaselineWaits.Print(out, "baseline")
		}
	}
	if opts.Baseline {
		return rep, nil
	}
	if opts.Compare {
		rep.Ideal, rep.IdealProc, err = runIdeal(ctx, opts, gen)
		if err != nil {
			return nil, err
		}
		rep.Ideal.Print(out)
		rep.IdealProc.PrintCPUPerRequest(out, "ideal receiver", rep.Ideal.Requests+1)
	}
	selfCPU, _ := readCPU(os.Getpid())
	var sampler *procSampler
	if opts.PID > 0 {
		if sampler, err = startProcSampler(opts.PID); err != nil {
			return nil, fmt.Errorf("--pid: %w", err)
		}
	}
	fmt.Fprintf(out, "gitlease: run %s, %d repositories octocat/load-%s-<n> (ids %d..%d)\n",
		run, opts.Repos, run, repoBase, repoBase+int64(opts.Repos)-1)
	ws, err := startWaits(ctx, opts)
	if err != nil {
		return nil, err
	}
	l, err := runHTTP(ctx, opts, gen)
	rep.HTTPWaits = stopWaits(ws, out)
	if sampler != nil {
		ps, perr := sampler.Stop()
		rep.Proc = &ps
		if perr != nil {
			fmt.Fprintf(out, "warning: sampling pid %d: %v\n", opts.PID, perr)
		}
	}
	if err != nil {
		return nil, err
	}
	rep.HTTP, rep.Sent = l.stats(opts), l.sentCounts()
	rep.HTTP.Print(out)
	fmt.Fprintf(out, "  sent:       %s\n", counts(rep.Sent))
	if rep.Proc != nil {
		rep.Proc.Print(out)
		rep.Proc.PrintPerRequest(out, rep.HTTP.Requests+1) // the probe too
		rep.Proc.PrintCPUPerRequest(out, "serve", rep.HTTP.Requests+1)
	}
	if cpu, err := readCPU(os.Getpid()); err == nil && rep.HTTP.Elapsed > 0 {
		fmt.Fprintf(out, "gitlease-load itself: CPU %.1fs user+system (%.2f cores on average)\n",
			(cpu - selfCPU).Seconds(), (cpu-selfCPU).Seconds()/rep.HTTP.Elapsed.Seconds())
	}
	if rep.HTTPWaits != nil {
		rep.HTTPWaits.Print(out, "gitlease")
	}
	if rep.Baseline != nil {
		fmt.Fprintf(out, "ratio: gitlease %.1f requests/s / baseline %.1f requests/s = %.1f%% of the durable-commit floor\n",
			rep.HTTP.Throughput(), rep.Baseline.Throughput(), 100*rep.Ratio())
	}
	if rep.Ideal != nil {
		fmt.Fprintf(out, "ratio: gitlease %.1f requests/s / ideal receiver %.1f requests/s = %.1f%%\n",
			rep.HTTP.Throughput(), rep.Ideal.Throughput(), 100*rep.HTTP.Throughput()/rep.Ideal.Throughput())
		if rep.Proc != nil && rep.IdealProc.CPU > 0 && rep.HTTP.Requests > 0 && rep.Ideal.Requests > 0 {
			per := rep.Proc.CPU.Seconds() / float64(rep.HTTP.Requests+1)
			ideal := rep.IdealProc.CPU.Seconds() / float64(rep.Ideal.Requests+1)
			fmt.Fprintf(out, "ratio: serve CPU %.3f ms / ideal receiver CPU %.3f ms per delivery = %.2fx\n", 1000*per, 1000*ideal, per/ideal)
		}
	}
	if opts.DSN != "" {
		if rep.Checks, err = checkDatabase(ctx, opts.DSN, l); err != nil {
			return rep, fmt.Errorf("database check: %w", err)
		}
		for _, c := range rep.Checks {
			c.Print(out)
		}
		if rep.Failed() {
			return rep, ErrCheckFailed
		}
	} else {
		fmt.Fprintln(out, "database check skipped: no DATABASE_URL")
	}
	return rep, nil
}

// startWaits starts the PostgreSQL wait sampler when opts asks for it.
func startWaits(ctx context.Context, opts Options) (*waitSampler, error) {
	if !opts.PGWaits {
		return nil, nil
	}
	return startWaitSampler(ctx, opts.DSN)
}

// stopWaits stops ws, if any, and returns its profile; a sampling error is
// reported to out, the profile kept.
func stopWaits(ws *waitSampler, out io.Writer) *WaitProfile {
	if ws == nil {
		return nil
	}
	p, err := ws.Stop()
	if err != nil {
		fmt.Fprintf(out, "warning: --pg-waits: %v\n", err)
	}
	return &p
}

// validate checks opts and fills in defaults.
func (o *Options) validate() error {
	switch {
	case o.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", o.Concurrency)
	case o.Count < 0:
		return fmt.Errorf("--count must not be negative, got %d", o.Count)
	case o.Duration < 0:
		return fmt.Errorf("--duration must not be negative, got %s", o.Duration)
	case o.Count == 0 && o.Duration == 0:
		return errors.New("set --count or --duration (or both: whichever is reached first ends the run)")
	case o.Replay < 0 || o.Replay > 1 || o.Collide < 0 || o.Collide > 1 || o.Replay+o.Collide > 1:
		return fmt.Errorf("--replay %g and --collide %g must be shares from 0 to 1 adding up to at most 1", o.Replay, o.Collide)
	case o.Rate < 0:
		return fmt.Errorf("--rate must not be negative, got %g", o.Rate)
	case o.Baseline && o.Compare:
		return errors.New("--baseline and --compare exclude each other (--compare runs the baseline too)")
	case (o.Baseline || o.Compare) && o.DSN == "":
		return errors.New("--baseline and --compare need DATABASE_URL, the database serve uses")
	case o.PGWaits && o.DSN == "":
		return errors.New("--pg-waits needs DATABASE_URL")
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Repos <= 0 {
		o.Repos = 16
	}
	if o.BodySize <= 0 {
		o.BodySize = DefaultBodySize
	}
	if o.DSN != "" {
		if err := checkLoopbackDSN(o.DSN); err != nil {
			return err
		}
	}
	if !o.Baseline {
		if err := checkLoopbackURL(o.URL); err != nil {
			return err
		}
		if o.Secret == "" {
			return errors.New("GITHUB_WEBHOOK_SECRET is required to sign deliveries")
		}
	}
	return nil
}

// runIdentity returns a random name for this run and the first of its
// repository IDs. They are random, not drawn from --seed, so that runs
// against one database never share subjects: items stay live without a
// worker, and a second run's subjects would all collide with the first's.
func runIdentity() (string, int64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", 0, fmt.Errorf("random run name: %w", err)
	}
	// GitHub's repository IDs are below 2^31 today; stay well above that
	// and below 2^53 so JSON readers keep them exact.
	base := int64(1<<40) + int64(binary.BigEndian.Uint32(b[4:]))<<8
	return hex.EncodeToString(b[:4]), base, nil
}

// pace hands out request slots 0, 1, 2, ... on the returned channel: no
// faster than opts.Rate, until opts.Count slots or opts.Duration from start
// have passed or ctx ends. Each receiver takes one slot per request.
func pace(ctx context.Context, opts Options, start time.Time) <-chan int {
	slots := make(chan int)
	go func() {
		defer close(slots)
		var deadline <-chan time.Time
		if opts.Duration > 0 {
			t := time.NewTimer(opts.Duration - time.Since(start))
			defer t.Stop()
			deadline = t.C
		}
		for i := 0; opts.Count == 0 || i < opts.Count; i++ {
			if opts.Rate > 0 {
				due := start.Add(time.Duration(float64(i) / opts.Rate * float64(time.Second)))
				if wait := time.Until(due); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case <-ctx.Done():
						t.Stop()
						return
					case <-deadline:
						t.Stop()
						return
					case <-t.C:
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-deadline:
				return
			case slots <- i:
			}
		}
	}()
	return slots
}

// runHTTP sends the load to opts.URL and returns the ledger of answers.
func runHTTP(ctx context.Context, opts Options, gen *generator) (*ledger, error) {
	client := newHTTPClient(opts.Concurrency, opts.Timeout)
	defer client.CloseIdleConnections()
	// One request first, outside the measurement: it opens a connection
	// and tells a wrong URL or secret apart from a slow server at once.
	if err := probe(ctx, client, opts); err != nil {
		return nil, err
	}
	l := newLedger(gen, opts)
	l.start = time.Now()
	slots := pace(ctx, opts, l.start)
	var wg sync.WaitGroup
	for range opts.Concurrency {
		wg.Go(func() {
			for range slots {
				l.record(send(ctx, client, opts, gen, l.choose()))
			}
		})
	}
	wg.Wait()
	l.end = time.Now()
	if err := ctx.Err(); err != nil {
		return l, fmt.Errorf("load interrupted: %w", err)
	}
	return l, nil
}

// probe sends a signed ping and expects a 200: serve is there, and the
// secret is the one it verifies with.
func probe(ctx context.Context, client *http.Client, opts Options) error {
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1,"hook":{"type":"App","id":1,"active":true,"events":["issues"],"config":{"content_type":"json","insecure_ssl":"0","url":"http://127.0.0.1/webhook"}}}`)
	req, err := newDeliveryRequest(ctx, opts.URL, opts.Secret, "ping", uuid.NewString(), body)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probe %s: %w", opts.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("probe %s: 401: serve does not verify deliveries with this GITHUB_WEBHOOK_SECRET", opts.URL)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("probe %s: a signed ping answered %s: %s", opts.URL, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// newDeliveryRequest builds a POST like GitHub's: its headers, the body
// signed with secret.
func newDeliveryRequest(ctx context.Context, url, secret, event, id string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	h := req.Header
	h.Set("Content-Type", webhook.ContentTypeJSON)
	h.Set("User-Agent", "GitHub-Hookshot/gitlease-load")
	h.Set(webhook.EventHeader, event)
	h.Set(webhook.DeliveryHeader, id)
	h.Set(webhook.SignatureHeader, webhook.Sign([]byte(secret), body))
	h.Set("X-GitHub-Hook-ID", "1")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "1")
	return req, nil
}

// send renders, signs and sends one request and reads its answer. The
// latency runs from just before the request is written to the end of the
// answer.
func send(ctx context.Context, client *http.Client, opts Options, gen *generator, r request) *answer {
	body := gen.body(r.d)
	a := &answer{request: r, size: len(body)}
	req, err := newDeliveryRequest(ctx, opts.URL, opts.Secret, r.d.Kind.event(), r.d.ID, body)
	if err != nil {
		a.err = err.Error()
		return a
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		a.latency = time.Since(start)
		a.err = err.Error()
		return a
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	a.latency = time.Since(start)
	a.status = resp.StatusCode
	if err != nil {
		a.err = "read answer: " + err.Error()
		return a
	}
	if err := json.Unmarshal(b, &a.resp); err != nil {
		a.err = fmt.Sprintf("answer is not JSON: %q", truncate(string(b), 200))
		return a
	}
	a.err = a.resp.Error
	return a
}

// truncate shortens s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
