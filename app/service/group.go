package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Runner is the start/stop shape every background service has (Service,
// Periodic, Notifier and the services built on them).
type Runner interface {
	Start(ctx context.Context) error
	Stop()
}

// Member is one part of a Group: Start brings it up and returns (nil:
// nothing to start), Stop brings it down and waits until it is down (nil:
// nothing to stop). Stop is called only on a member whose Start succeeded.
type Member struct {
	Name  string
	Start func(ctx context.Context) error
	Stop  func(ctx context.Context) error
}

// Of is the Member of a Runner.
func Of(name string, r Runner) Member {
	return Member{Name: name, Start: r.Start, Stop: func(context.Context) error { r.Stop(); return nil }}
}

// Group starts its members in the order they were added and stops them in
// the reverse order, so each member may rely on the ones before it from
// its start until its stop. A member whose Start fails stops the start:
// the members started before it are stopped again, in reverse, and the
// later ones never start. Its zero value is an empty group.
type Group struct {
	mu      sync.Mutex
	members []Member
	started int // members[:started] are up
}

// Add appends m to the group, before Start: it starts after every member
// added before it and stops before them.
func (g *Group) Add(m ...Member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = append(g.members, m...)
}

// Start starts the members in order. If one fails, Start stops the ones
// it started, in reverse, and returns that member's error, naming it.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started > 0 {
		return ErrStarted
	}
	for _, m := range g.members {
		if m.Start != nil {
			if err := m.Start(ctx); err != nil {
				err = fmt.Errorf("start %s: %w", m.Name, err)
				return errors.Join(err, g.stopLocked(ctx))
			}
		}
		g.started++
	}
	return nil
}

// Stop stops the started members in reverse order, each after the one
// started after it has stopped, and returns their errors, joined. A
// member's error does not keep the members before it from stopping.
// Stop is safe to call more than once, or before Start.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopLocked(ctx)
}

func (g *Group) stopLocked(ctx context.Context) error {
	var errs []error
	for ; g.started > 0; g.started-- {
		m := g.members[g.started-1]
		if m.Stop == nil {
			continue
		}
		if err := m.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", m.Name, err))
		}
	}
	return errors.Join(errs...)
}
