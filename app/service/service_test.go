package service_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/service"
)

func TestServiceStartStop(t *testing.T) {
	t.Parallel()
	var s service.Service
	s.Stop() // before Start: nothing to do
	var running atomic.Int32
	loop := func(ctx context.Context) {
		running.Add(1)
		<-ctx.Done()
		running.Add(-1)
	}
	if err := s.Start(context.Background(), loop); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background(), loop); !errors.Is(err, service.ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	s.Stop()
	if n := running.Load(); n != 0 {
		t.Fatalf("%d loops still running after Stop", n)
	}
	s.Stop() // twice: safe
	if err := s.Start(context.Background(), loop); err != nil {
		t.Fatalf("Start after Stop = %v", err)
	}
	s.Stop()
}

func TestPeriodicRunsAtStartAndEveryInterval(t *testing.T) {
	t.Parallel()
	runs := make(chan struct{}, 10)
	p := &service.Periodic{Name: "test", Interval: 10 * time.Millisecond, Run: func(context.Context) error {
		runs <- struct{}{}
		return errors.New("logged, not fatal")
	}}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-runs
	}
	p.Stop()
}
