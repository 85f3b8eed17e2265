package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/webhook"
)

// IdealFlag runs the tool as the ideal receiver (a child process the tool
// starts itself for --compare), serving on a loopback port until stdin
// closes. It is not meant to be set by hand.
const IdealFlag = "--ideal-receiver"

// idealTable is where the ideal receiver writes, next to gitlease's tables.
const idealTable = `CREATE TABLE IF NOT EXISTS load_ideal (id bigserial primary key, delivery_id text, body bytea)`

// idealReceiver is the least a receiver that keeps gitlease's promise can
// do per delivery: read the body, check the HMAC-SHA256 signature, insert
// the delivery ID and body in one committed transaction, answer. No parse,
// no queue. Its CPU per delivery is the yardstick for serve's.
type idealReceiver struct {
	pool   *pgxpool.Pool
	secret []byte
}

func (ir *idealReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, webhook.MaxBody))
	if err != nil {
		http.Error(w, `{"error":"body"}`, http.StatusRequestEntityTooLarge)
		return
	}
	id := r.Header.Get(webhook.DeliveryHeader)
	sig, ok := strings.CutPrefix(r.Header.Get(webhook.SignatureHeader), "sha256=")
	got, herr := hex.DecodeString(sig)
	mac := hmac.New(sha256.New, ir.secret)
	mac.Write(body)
	if !ok || herr != nil || !hmac.Equal(got, mac.Sum(nil)) || id == "" {
		http.Error(w, `{"error":"signature"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get(webhook.EventHeader) == "ping" {
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(webhook.Response{DeliveryID: id, Outcome: webhook.OutcomeIgnored})
		return
	}
	err = pgx.BeginFunc(r.Context(), ir.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(r.Context(), `INSERT INTO load_ideal (delivery_id, body) VALUES ($1, $2)`, id, body)
		return err
	})
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(webhook.Response{DeliveryID: id, Error: "database"})
		return
	}
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(webhook.Response{DeliveryID: id, Outcome: webhook.OutcomeEnqueued})
}

// serveIdeal is the child process: it listens on a free loopback port,
// prints "listening <addr>" and serves until stdin reaches EOF. The secret
// comes from GITHUB_WEBHOOK_SECRET, the database from DATABASE_URL, so
// neither shows in ps.
func serveIdeal(ctx context.Context, stdout io.Writer) error {
	dsn := os.Getenv("DATABASE_URL")
	if err := checkLoopbackDSN(dsn); err != nil {
		return err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	cfg.MaxConns = 20 // as serve's pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, idealTable); err != nil {
		return fmt.Errorf("create load_ideal: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: &idealReceiver{pool: pool, secret: []byte(os.Getenv("GITHUB_WEBHOOK_SECRET"))}, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
		_ = srv.Close()
	}()
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// idealChild is a running ideal receiver.
type idealChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	URL   string
}

// startIdeal starts this executable as the ideal receiver on opts.DSN and
// waits until it listens.
func startIdeal(ctx context.Context, opts Options) (*idealChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, IdealFlag)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+opts.DSN, "GITHUB_WEBHOOK_SECRET="+opts.Secret)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ideal receiver: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("ideal receiver did not start (%q)", line)
	}
	return &idealChild{cmd: cmd, stdin: stdin, URL: "http://" + addr + "/webhook"}, nil
}

// Stop ends the child and waits for it.
func (c *idealChild) Stop() {
	_ = c.stdin.Close()
	_ = c.cmd.Wait()
}

// runIdeal measures the ideal receiver under the same load as serve (fresh
// deliveries only: it answers no replays or collisions), with its CPU from
// /proc.
func runIdeal(ctx context.Context, opts Options, gen *generator) (*Stats, *ProcStats, error) {
	child, err := startIdeal(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	defer child.Stop()
	o := opts
	o.URL, o.Replay, o.Collide = child.URL, 0, 0
	sampler, err := startProcSampler(child.cmd.Process.Pid)
	if err != nil {
		return nil, nil, fmt.Errorf("sample ideal receiver: %w", err)
	}
	l, err := runHTTP(ctx, o, gen)
	ps, _ := sampler.Stop()
	if err != nil {
		return nil, nil, fmt.Errorf("ideal receiver: %w", err)
	}
	s := l.stats(o)
	s.Name = "ideal receiver"
	return s, &ps, nil
}
