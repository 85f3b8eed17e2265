package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestServeStartFailureStopsTheStarted: when one of serve's services fails
// to start (here the HTTP server: its port is taken), serve stops the ones
// it started before it and exits 1 with one line naming it; the ones after
// it (the built-in worker) never start.
func TestServeStartFailureStopsTheStarted(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildGitlease(t), "serve")
	cmd.Env = append(baseServeEnv(t, "GITHUB_WEBHOOK_SECRET=whsec-0123456789abcdef", "GITLEASE_WORKER_EXEC=true", "GITLEASE_WORKER_SLOTS=1"),
		fmt.Sprintf("PORT=%d", port))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("serve on a taken port: %v, want exit status 1\n%s", err, out)
	}
	if want := fmt.Sprintf("gitlease: start HTTP server: listen on port %d: ", port); !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	for _, never := range []string{`"serving"`, `"worker started"`} {
		if strings.Contains(string(out), never) {
			t.Errorf("output has %s after the HTTP server failed to start:\n%s", never, out)
		}
	}
}
