package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// leaser is the queue as a worker uses it. The built-in worker's is the
// Store itself; `gitlease worker`'s is an rpc.Client over /rpc. Fence
// problems are outcomes in the MutationResult, not errors; an error means
// the call did not get an answer (or was malformed) and may be retried.
type leaser interface {
	Lease(ctx context.Context, p queue.LeaseParams) (queue.LeaseResult, error)
	Renew(ctx context.Context, p queue.RenewParams) (queue.MutationResult, error)
	Complete(ctx context.Context, p queue.CompleteParams) (queue.MutationResult, error)
	ReleasePending(ctx context.Context, p queue.ReleasePendingParams) (queue.MutationResult, error)
	Entry(ctx context.Context, entryID string) (queue.View, error)
}

var _ leaser = (*rpc.Client)(nil)

// storeLeaser is the built-in worker's leaser: the Store, plus the
// gitlease/entry/get view of an item.
type storeLeaser struct{ *queue.Store }

func (s storeLeaser) Entry(ctx context.Context, entryID string) (queue.View, error) {
	v, err := s.View(ctx, entryID)
	if err != nil {
		return queue.View{}, fmt.Errorf("get entry %s: %w", entryID, err)
	}
	return v, nil
}

var _ leaser = storeLeaser{}

// rpcTimeout bounds one queue call of a worker, so a hung connection cannot
// hold a slot forever.
const rpcTimeout = 30 * time.Second
