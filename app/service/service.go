// Package service is the one start/stop shape of gitlease's background
// services (the outbox sender, the worker's notifier, the recovery sweeper,
// the delivery pruner), after River's startstop: Start puts the work in the
// background and returns; Stop cancels it and waits until it has exited.
// A Group starts such services in order and stops them in reverse.
package service

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// ErrStarted is returned by Start on a service that runs already.
var ErrStarted = errors.New("already started")

// Service runs one loop in the background. Embed it and call Start with the
// loop; its zero value is ready to use. Stop is safe to call more than once,
// or before Start.
type Service struct {
	mu     sync.Mutex
	ctx    context.Context // the running loop's context
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs loop in a goroutine until Stop is called or ctx ends. It
// returns ErrStarted if the loop runs already; after Stop it may start again.
func (s *Service) Start(ctx context.Context, loop func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return ErrStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.ctx, s.cancel, s.done = ctx, cancel, done
	go func() {
		defer close(done)
		loop(ctx)
	}()
	return nil
}

// Stop cancels the background loop and waits until it has exited.
func (s *Service) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.ctx, s.cancel, s.done = nil, nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Cancel asks the loop to end without waiting for it; Stop still waits.
func (s *Service) Cancel() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
}

// Stopping is closed once the running loop's context ends (Cancel, Stop,
// or the context given to Start). Before Start it returns a closed channel.
func (s *Service) Stopping() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.ctx.Done()
}

// Periodic is a Service that calls Run once at start and then every
// Interval, logging its errors, until stopped.
type Periodic struct {
	Name     string
	Interval time.Duration
	Run      func(ctx context.Context) error
	Logger   *slog.Logger

	Service
}

// Start runs p in the background.
func (p *Periodic) Start(ctx context.Context) error {
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return p.Service.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(p.Interval)
		defer t.Stop()
		for {
			if err := p.Run(ctx); err != nil && ctx.Err() == nil {
				logger.WarnContext(ctx, p.Name+" failed; trying again next interval", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}
