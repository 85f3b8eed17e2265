// Package worker runs queue items as commands. A Worker leases items into
// free slots (from the Store in serve, or over /rpc with an rpc.Client in
// `gitlease worker`), runs each as `sh -c` with the item in its
// environment, renews the lease while the command runs and completes or
// releases the item under the fence it was leased with; the Sweeper
// recovers the expired leases of built-in workers. It owns no table: every
// change goes through the queue's fenced calls, so a worker that lost its
// lease can change nothing. On Stop, running commands get the Grace period
// to finish before their items go back to pending. See docs/workers.md.
package worker
