package app

import (
	"context"
	"errors"
	"sync"
)

// errStarted is returned by Start on a service already started.
var errStarted = errors.New("already started")

// service is the start/stop shape of gitlease's background loops, as River's
// startstop: start runs loop in a goroutine until Stop or its context ends.
type service struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs loop in the background; it returns errStarted if it runs already.
func (s *service) start(ctx context.Context, loop func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errStarted
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		loop(ctx)
	}()
	return nil
}

// Stop cancels the background loop and waits until it has exited. It is
// safe to call more than once, or before Start.
func (s *service) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}
