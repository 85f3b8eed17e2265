package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gitlease/gitlease/app/service"
)

// journal records the starts and stops of a group's members, in order.
type journal struct{ events []string }

func (j *journal) member(name string, startErr, stopErr error) service.Member {
	return service.Member{Name: name,
		Start: func(context.Context) error { j.events = append(j.events, "start "+name); return startErr },
		Stop:  func(context.Context) error { j.events = append(j.events, "stop "+name); return stopErr },
	}
}

func (j *journal) String() string { return strings.Join(j.events, ", ") }

// TestGroupOrder: members start in the order added and stop in reverse;
// a second Stop does nothing; a member without Start or Stop is skipped
// in that direction and still keeps its place.
func TestGroupOrder(t *testing.T) {
	t.Parallel()
	var j journal
	var g service.Group
	g.Add(j.member("a", nil, nil), j.member("b", nil, nil))
	g.Add(service.Member{Name: "stop only", Stop: func(context.Context) error { j.events = append(j.events, "stop only"); return nil }})
	g.Add(j.member("c", nil, nil))
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(t.Context()); !errors.Is(err, service.ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	const want = "start a, start b, start c, stop c, stop only, stop b, stop a"
	if got := j.String(); got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestGroupStartFailure: the first member that fails to start stops the
// start: the ones before it stop again in reverse, the ones after it never
// start, and the error names it. A later Stop has nothing left to stop.
func TestGroupStartFailure(t *testing.T) {
	t.Parallel()
	var j journal
	var g service.Group
	boom := errors.New("boom")
	g.Add(j.member("a", nil, nil), j.member("b", nil, nil), j.member("c", boom, nil), j.member("d", nil, nil))
	err := g.Start(t.Context())
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "start c: boom") {
		t.Fatalf("Start = %v, want boom naming c", err)
	}
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	const want = "start a, start b, start c, stop b, stop a"
	if got := j.String(); got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestGroupStopErrors: a member that fails to stop does not keep the ones
// before it from stopping; Stop returns every failure, each named.
func TestGroupStopErrors(t *testing.T) {
	t.Parallel()
	var j journal
	var g service.Group
	e1, e2 := errors.New("e1"), errors.New("e2")
	g.Add(j.member("a", nil, e1), j.member("b", nil, nil), j.member("c", nil, e2))
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := g.Stop(t.Context())
	if !errors.Is(err, e1) || !errors.Is(err, e2) || !strings.Contains(err.Error(), "stop a: e1") || !strings.Contains(err.Error(), "stop c: e2") {
		t.Errorf("Stop = %v, want e1 and e2, named", err)
	}
	const want = "start a, start b, start c, stop c, stop b, stop a"
	if got := j.String(); got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestGroupOfRunner: Of makes a Member of a Service-shaped runner: the
// group's Start starts it, the group's Stop stops it.
func TestGroupOfRunner(t *testing.T) {
	t.Parallel()
	ran := make(chan struct{}, 1)
	p := &service.Periodic{Name: "p", Interval: 1 << 40, Run: func(ctx context.Context) error {
		ran <- struct{}{}
		return nil
	}}
	var g service.Group
	g.Add(service.Of("periodic", p))
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-ran // Periodic runs once at start
	select {
	case <-p.Stopping():
		t.Fatal("the periodic service stopped before the group's Stop")
	default:
	}
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Stopping():
	default:
		t.Error("the periodic service still runs after the group's Stop")
	}
}
