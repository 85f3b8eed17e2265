package main

import (
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/webhook"
)

// The ledger: what the load sends (first deliveries, replays, collisions)
// and what each answer was, for the report and the database checks.

// role is why a request was sent.
type role int

const (
	roleFresh   role = iota // a new delivery about a new subject
	roleReplay              // an earlier delivery sent again: same ID, same body
	roleCollide             // a new delivery about a subject with a live item
)

// String names r as the report's "sent" line does.
func (r role) String() string {
	switch r {
	case roleReplay:
		return "replay"
	case roleCollide:
		return "collide"
	}
	return "fresh"
}

// request is one delivery to send and why.
type request struct {
	d    delivery
	role role
	// orig is, for a replay, the first answer of the delivery sent again;
	// for a collision, the answer that enqueued the subject's item.
	orig *answer
}

// answer is a request and how it was answered.
type answer struct {
	request
	status  int // 0: no HTTP answer (transport error)
	resp    webhook.Response
	err     string // transport error, or the answer's error field
	latency time.Duration
	size    int
}

// ok reports whether the request was answered 2xx.
func (a *answer) ok() bool { return a.status >= 200 && a.status < 300 }

// liveSubject is a subject whose opening delivery was answered enqueued.
type liveSubject struct {
	enq  *answer
	revs int // synchronize pushes sent so far (pull requests)
}

// ledger decides what each request is and keeps every answer. Safe for
// concurrent use.
type ledger struct {
	gen  *generator
	opts Options

	mu      sync.Mutex
	rng     *mrand.Rand
	next    int // the next fresh subject number
	answers []*answer
	firsts  []*answer      // first arrivals answered 2xx: what a replay resends
	live    []*liveSubject // enqueued subjects: what a collision hits
	start   time.Time
	end     time.Time
}

// newLedger returns an empty ledger; its choices are drawn from opts.Seed.
func newLedger(gen *generator, opts Options) *ledger {
	return &ledger{gen: gen, opts: opts, rng: mrand.New(mrand.NewPCG(opts.Seed, 0x636f6c6c)), next: 1}
}

// choose decides the next request. Replays and collisions need an earlier
// answer to refer to; until there is one, the request is fresh.
func (l *ledger) choose() request {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rng.Float64()
	switch {
	case r < l.opts.Replay && len(l.firsts) > 0:
		orig := l.firsts[l.rng.IntN(len(l.firsts))]
		return request{d: orig.d, role: roleReplay, orig: orig}
	case r >= l.opts.Replay && r < l.opts.Replay+l.opts.Collide && len(l.live) > 0:
		s := l.live[l.rng.IntN(len(l.live))]
		d := s.enq.d
		d.ID = uuid.NewString()
		if d.Kind == prOpened {
			s.revs++
			d.Kind, d.Rev = prSynchronize, s.revs
		} else {
			d.Kind = issueCommand
		}
		return request{d: d, role: roleCollide, orig: s.enq}
	}
	n := l.next
	l.next++
	kind := issueOpened
	if l.rng.IntN(2) == 1 {
		kind = prOpened
	}
	return request{d: delivery{ID: uuid.NewString(), Kind: kind, Repo: n % l.gen.repos, Number: n}, role: roleFresh}
}

// record keeps a's outcome and makes it available to later replays and
// collisions.
func (l *ledger) record(a *answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, a)
	if a.role != roleReplay && a.ok() {
		l.firsts = append(l.firsts, a)
		if a.role == roleFresh && a.resp.Outcome == webhook.OutcomeEnqueued {
			l.live = append(l.live, &liveSubject{enq: a})
		}
	}
}

// stats summarises the answers.
func (l *ledger) stats(opts Options) *Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &Stats{Name: "gitlease", Concurrency: opts.Concurrency, Rate: opts.Rate, Requests: len(l.answers),
		Elapsed: l.end.Sub(l.start), ByStatus: map[string]int{}, ByOutcome: map[string]int{}}
	lat := make([]time.Duration, len(l.answers))
	total := 0
	for i, a := range l.answers {
		lat[i] = a.latency
		total += a.size
		if a.status == 0 {
			s.ByStatus["transport error"]++
		} else {
			s.ByStatus[strconv.Itoa(a.status)]++
		}
		o := string(a.resp.Outcome)
		if o == "" {
			o = "-"
		}
		s.ByOutcome[o]++
	}
	if len(l.answers) > 0 {
		s.BodyBytes = total / len(l.answers)
	}
	s.Latencies = sortLatencies(lat)
	return s
}

// sentCounts counts the requests by role.
func (l *ledger) sentCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	for _, a := range l.answers {
		m[a.role.String()]++
	}
	return m
}

// snapshot returns the answers so far.
func (l *ledger) snapshot() []*answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*answer(nil), l.answers...)
}
