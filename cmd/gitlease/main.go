// Command gitlease is the gitlease GitHub App and queue server.
//
// Usage: gitlease <command> [flags]; gitlease --manifest prints the queue
// plugin manifest. See docs/configuration.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gitlease/gitlease/app"
)

// version is stamped at build time (-ldflags "-X main.version=...").
var version = "0.1.0-dev"

const usage = `gitlease: turns GitHub issue and pull-request activity into durable, exactly-owned work.

Usage:
  gitlease <command> [flags]
  gitlease --manifest        print the queue plugin manifest (one JSON line)

Commands:
  serve     HTTP server: webhook intake, /rpc, health, metrics, built-in worker
  migrate   apply database migrations and exit
  dev       run locally on an embedded PostgreSQL under .gitlease/
  plugin    speak the queue protocol over stdio against DATABASE_URL
  worker    a remote worker: lease over /rpc and run --exec per item (--url; token from GITLEASE_RPC_WORKER_TOKEN)
  deliver   sign a payload file and POST it as a GitHub delivery (--event E FILE)
  redeliver scan GitHub's delivery log once and redeliver what failed (--since, --guid, --dry-run, --include-rejected)
  manifest  print the GitHub App manifest as JSON (--url https://your.host)
  version   print the version

Run 'gitlease <command> --help' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command and returns the process exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	logger := slog.New(app.LogHandler{Handler: slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})})
	slog.SetDefault(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "--manifest", "-m":
		err = printManifest(stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, version)
	case "serve":
		err = runServe(ctx, rest, stderr, logger)
	case "migrate":
		err = runMigrate(ctx, rest, stderr, logger)
	case "plugin":
		err = runPlugin(ctx, rest, stdin, stdout, stderr, logger)
	case "worker":
		err = runWorker(ctx, rest, stderr, logger)
	case "dev":
		err = runDev(ctx, rest, stdout, stderr, logger)
	case "deliver":
		err = runDeliver(ctx, rest, stdout, stderr)
	case "redeliver":
		err = runRedeliver(ctx, rest, stdout, stderr, logger)
	case "manifest":
		err = runManifest(rest, stdout, stderr)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "gitlease: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var cfgErr *configError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &cfgErr):
		fmt.Fprintf(stderr, "gitlease: %v\n", err)
		return 2
	case errors.Is(err, errHelp):
		return 0
	}
	fmt.Fprintf(stderr, "gitlease: %v\n", err)
	return 1
}

func printManifest(w io.Writer) error {
	b, err := json.Marshal(rpcManifest())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
