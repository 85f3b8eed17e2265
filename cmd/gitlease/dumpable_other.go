//go:build !linux

package main

// makeNonDumpable does nothing outside Linux, which has no PR_SET_DUMPABLE;
// there a separate GITLEASE_WORKER_USER is the worker's only barrier.
func makeNonDumpable() error { return nil }
