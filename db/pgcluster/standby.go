package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// InitStandby fills the empty data directory with a base backup of
// primary, a running cluster on this machine (pg_basebackup over
// 127.0.0.1 as the postgres role, WAL streamed, a fast checkpoint), with
// -R: a standby.signal and primary's connection in postgresql.auto.conf,
// so that Start starts a hot standby streaming from primary. primary must
// trust local replication connections, as a cluster without
// Config.Password does. It returns an error when the data directory is
// not empty.
func (c *Cluster) InitStandby(ctx context.Context, primary *Cluster) error {
	if primary.cfg.Password != "" {
		return errors.New("make a standby: only of a primary without a password (trust authentication)")
	}
	if entries, err := os.ReadDir(c.cfg.DataDir); err != nil || len(entries) > 0 {
		return fmt.Errorf("make a standby: data directory %s is not empty (or unreadable: %v)", c.cfg.DataDir, err)
	}
	c.logger.Info("creating postgres standby", "data", c.cfg.DataDir, "primary_port", primary.Port())
	return c.run(ctx, "pg_basebackup", "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port()),
		"-U", "postgres", "-D", c.cfg.DataDir, "-R", "-X", "stream", "-c", "fast", "--no-password")
}

// Promote makes the standby running on the data directory a primary
// (pg_ctl promote) and waits until it takes writes.
func (c *Cluster) Promote(ctx context.Context) error {
	return c.run(ctx, "promote postgres", "pg_ctl", "promote", "-w", "-t", pgWaitSeconds, "-D", c.cfg.DataDir)
}

// Kill ends the server this Cluster started the way a crash of its
// machine would: SIGKILL to the postmaster and every process of its
// process group (its backends, WAL writer and senders) at once, with
// nothing flushed or said to its clients. It waits until the postmaster
// is gone. Start brings it back, with crash recovery; RemoveData and
// InitStandby make it a standby of another cluster instead.
func (c *Cluster) Kill() error {
	if !c.started {
		return nil
	}
	pid := PostmasterPID(c.cfg.DataDir)
	if pid <= 0 {
		return fmt.Errorf("kill postgres: no postmaster.pid in %s", c.cfg.DataDir)
	}
	// Start runs pg_ctl in a process group of its own, which the postmaster
	// and its children keep: killing the group kills them all at once.
	target := pid
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid != syscall.Getpgrp() {
		target = -pgid
	}
	if err := syscall.Kill(target, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill postgres (%d): %w", target, err)
	}
	if !waitGone(pid, 30*time.Second) {
		return fmt.Errorf("kill postgres: postmaster %d still running after SIGKILL", pid)
	}
	c.started = false
	c.dropTmpSocketDir()
	return nil
}

// RemoveData deletes the data directory of a cluster that is not running
// and leaves it empty, for InitStandby.
func (c *Cluster) RemoveData(ctx context.Context) error {
	if running, err := c.Running(ctx); err == nil && running {
		return fmt.Errorf("remove the data of %s: a server is running on it", c.cfg.DataDir)
	}
	if err := os.RemoveAll(c.cfg.DataDir); err != nil {
		return fmt.Errorf("remove the data directory: %w", err)
	}
	if err := os.Mkdir(c.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("recreate the data directory: %w", err)
	}
	if c.asPostgres {
		if err := os.Chown(c.cfg.DataDir, c.uid, c.gid); err != nil {
			return fmt.Errorf("give the data directory to the postgres user: %w", err)
		}
	}
	return nil
}
