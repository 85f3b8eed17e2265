package service_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/service"
	"github.com/gitlease/gitlease/db/dbtest"
)

// TestNotifierCoalescesWithinTheGap: a signal after a quiet spell is
// sent, a burst of signals becomes at most one NOTIFY per NotifyGap,
// whatever the number of signals, and the burst's last signal is never
// lost: a notification follows it.
func TestNotifierCoalescesWithinTheGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var got, last atomic.Int64 // notifications, and when the last one came (UnixNano)
	woke := make(chan struct{}, 1)
	l := &service.Listener{Pool: pool, Channel: "gitlease_test", Wake: func() {
		got.Add(1)
		last.Store(time.Now().UnixNano())
		select {
		case woke <- struct{}{}:
		default:
		}
	}}
	conn, err := l.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); l.Run(lctx, conn) }()
	t.Cleanup(func() { stop(); <-done })

	n := service.NewNotifier(pool, "gitlease_test", nil)
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)

	n.Signal()
	<-woke // the first signal is sent without waiting for anything else
	got.Store(0)
	const signals = 2000
	start := time.Now()
	for range signals {
		n.Signal()
		time.Sleep(10 * time.Microsecond)
	}
	end := time.Now()
	for last.Load() < end.UnixNano() {
		<-woke
	}
	time.Sleep(3 * service.NotifyGap) // nothing more is coming
	elapsed := end.Sub(start)
	max := int64(elapsed/service.NotifyGap) + 2
	if g := got.Load(); g < 1 || g > max {
		t.Fatalf("%d signals over %v made %d notifications, want 1 to %d", signals, elapsed, g, max)
	}
}
