package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// makeNonDumpable clears the process's dumpable flag, so that processes of
// the same (non-root) user, worker commands among them, can no longer read
// /proc/<serve>/environ or /proc/<serve>/mem or attach to it, and it leaves
// no core dump holding its secrets. It returns the prctl error.
func makeNonDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the server non-dumpable (prctl PR_SET_DUMPABLE): %w", err)
	}
	return nil
}
