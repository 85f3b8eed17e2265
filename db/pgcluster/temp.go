package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// StartTemp creates a throwaway cluster in a fresh directory under parent,
// initialises it and starts it on a free port on 127.0.0.1 with durability
// off (Config.Throwaway). An empty parent means os.TempDir(), or /tmp when
// the process is root, because the postgres OS user must be able to reach
// the directory and $TMPDIR is often private to root. Of cfg, BinDir,
// MaxConnections and CommandTimeout are used; the paths are set inside the
// new directory (see Dir). Remove stops the cluster and deletes the
// directory. If StartTemp fails, it leaves nothing behind.
func StartTemp(ctx context.Context, logger *slog.Logger, parent string, cfg Config) (*Cluster, error) {
	return startTemp(ctx, logger, parent, cfg, (*Cluster).Init)
}

// StartTempStandby is StartTemp for a standby of primary, a running
// cluster on this machine: the data directory is a base backup of it
// (InitStandby), and the server starts in hot standby, streaming from it.
// Of cfg, Settings is used too; the primary's are not copied.
func StartTempStandby(ctx context.Context, logger *slog.Logger, parent string, primary *Cluster, cfg Config) (*Cluster, error) {
	return startTemp(ctx, logger, parent, cfg, func(c *Cluster, ctx context.Context) error { return c.InitStandby(ctx, primary) })
}

// startTemp makes the throwaway directory and cluster, fills the data
// directory with initData and starts the server; on failure it leaves
// nothing behind.
func startTemp(ctx context.Context, logger *slog.Logger, parent string, cfg Config, initData func(*Cluster, context.Context) error) (_ *Cluster, err error) {
	if parent == "" {
		parent = os.TempDir()
		if os.Geteuid() == 0 {
			parent = "/tmp"
		}
	}
	root, err := os.MkdirTemp(parent, "gitlease-pg-")
	if err != nil {
		return nil, fmt.Errorf("create throwaway cluster directory: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(root)
		}
	}()
	// 0755: the postgres OS user must reach data/ and run/ inside it.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, fmt.Errorf("create throwaway cluster directory: %w", err)
	}
	cfg.DataDir = filepath.Join(root, "data")
	cfg.LogFile = filepath.Join(root, "postgres.log")
	cfg.SocketDir = filepath.Join(root, "run")
	cfg.Throwaway = true
	c, err := New(ctx, logger, cfg)
	if err != nil {
		return nil, err
	}
	c.tempRoot = root
	if err := initData(c, ctx); err != nil {
		return nil, err
	}
	if err := c.Start(ctx, 0); err != nil {
		return nil, err
	}
	return c, nil
}

// Dir is the directory StartTemp made, holding the data directory, the
// socket directory and the log; "" for a cluster from New.
func (c *Cluster) Dir() string { return c.tempRoot }

// Remove stops the server this Cluster started (see Stop) and, for a
// cluster from StartTemp, deletes its directory. A cluster from New keeps
// its data directory: that is the caller's. The directory is deleted even
// when Stop fails; the error then says what Stop did.
func (c *Cluster) Remove(ctx context.Context) error {
	err := c.Stop(ctx)
	if c.tempRoot != "" {
		if rerr := os.RemoveAll(c.tempRoot); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove throwaway cluster: %w", rerr))
		}
	}
	return err
}

// freePort returns a TCP port on 127.0.0.1 that nothing listened on a
// moment ago; something else may take it before the caller binds it.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// PortFree reports whether a listener could bind 127.0.0.1:port right now.
func PortFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
