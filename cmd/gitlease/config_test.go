package main

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSecretsNotFromFlags: the private key, webhook secrets and RPC token
// are refused as flags (they would show in ps) and read from the
// environment or from a *_FILE; the worker and intake settings parse.
func TestSecretsNotFromFlags(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("from-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	urlFile := filepath.Join(dir, "database-url")
	if err := os.WriteFile(urlFile, []byte("postgres://gitlease:pw@127.0.0.1:5432/gitlease\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("fifteen-chars-x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"GITHUB_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET", "GITHUB_WEBHOOK_SECRET_FILE", "GITLEASE_RPC_TOKEN",
		"GITLEASE_RPC_TOKEN_FILE", "GITLEASE_RPC_WORKER_TOKEN", "GITLEASE_RPC_WORKER_TOKEN_FILE", "DATABASE_URL", "DATABASE_URL_FILE",
		"GITLEASE_WORKER_ENV", "GITLEASE_WORKER_USER", "GITLEASE_MAX_INFLIGHT_BODY",
		"GITLEASE_WORKER_SANDBOX", "GITLEASE_WORKER_TIMEOUT", "GITLEASE_ALLOWED_AUTHORS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		setting string // the configError's setting, "" for success
		check   func(t *testing.T, c config)
	}{
		{name: "webhook secret flag", args: []string{"--github-webhook-secret=s"}, setting: "flags"},
		{name: "rpc token flag", args: []string{"--rpc-token=t"}, setting: "flags"},
		{name: "private key flag", args: []string{"--github-private-key=k"}, setting: "flags"},
		{name: "database URL flag", args: []string{"--database-url=postgres://u:pw@h/db"}, setting: "flags"},
		{name: "worker token flag", args: []string{"--rpc-worker-token=0123456789abcdef"}, setting: "flags"},
		{name: "database URL from a file", args: []string{"--database-url-file", urlFile},
			check: func(t *testing.T, c config) {
				if c.DatabaseURL != "postgres://gitlease:pw@127.0.0.1:5432/gitlease" {
					t.Errorf("database URL %q, want the file's", c.DatabaseURL)
				}
			}},
		{name: "rpc token from a file", env: map[string]string{"GITLEASE_RPC_TOKEN_FILE": tokenFile},
			check: func(t *testing.T, c config) {
				if c.RPCToken != "from-file-0123456789" {
					t.Errorf("RPC token %q, want the file's", c.RPCToken)
				}
			}},
		{name: "worker token", env: map[string]string{"GITLEASE_RPC_TOKEN": "0123456789abcdef", "GITLEASE_RPC_WORKER_TOKEN": "fedcba9876543210"},
			check: func(t *testing.T, c config) {
				if c.RPCToken != "0123456789abcdef" || c.RPCWorkerToken != "fedcba9876543210" {
					t.Errorf("tokens %q %q", string(c.RPCToken), string(c.RPCWorkerToken))
				}
			}},
		{name: "worker token the same as the full one", env: map[string]string{"GITLEASE_RPC_TOKEN": "0123456789abcdef", "GITLEASE_RPC_WORKER_TOKEN": "0123456789abcdef"},
			setting: "GITLEASE_RPC_WORKER_TOKEN"},
		{name: "short rpc token", env: map[string]string{"GITLEASE_RPC_TOKEN": "fifteen-chars-x"}, setting: "GITLEASE_RPC_TOKEN"},
		{name: "short worker token", env: map[string]string{"GITLEASE_RPC_WORKER_TOKEN": "fifteen-chars-x"}, setting: "GITLEASE_RPC_WORKER_TOKEN"},
		{name: "short token in a file", env: map[string]string{"GITLEASE_RPC_WORKER_TOKEN_FILE": short}, setting: "GITLEASE_RPC_WORKER_TOKEN_FILE"},
		{name: "short second webhook secret", env: map[string]string{"GITHUB_WEBHOOK_SECRET": "0123456789abcdef, fifteen-chars-x"}, setting: "GITHUB_WEBHOOK_SECRET"},
		{name: "short webhook secret in a file", env: map[string]string{"GITHUB_WEBHOOK_SECRET_FILE": short}, setting: "GITHUB_WEBHOOK_SECRET_FILE"},
		{name: "sixteen characters", env: map[string]string{"GITHUB_WEBHOOK_SECRET": "sixteen-chars-xy,sixteen-chars-yz", "GITLEASE_RPC_TOKEN": "sixteen-chars-xy"},
			check: func(t *testing.T, c config) {
				if len(c.WebhookSecrets) != 2 || c.RPCToken != "sixteen-chars-xy" {
					t.Errorf("secrets %d, token %q", len(c.WebhookSecrets), string(c.RPCToken))
				}
			}},
		{name: "webhook secret and its file", env: map[string]string{"GITHUB_WEBHOOK_SECRET": "0123456789abcdef", "GITHUB_WEBHOOK_SECRET_FILE": tokenFile},
			setting: "GITHUB_WEBHOOK_SECRET"},
		{name: "unreadable file", env: map[string]string{"GITHUB_WEBHOOK_SECRET_FILE": filepath.Join(dir, "none")},
			setting: "GITHUB_WEBHOOK_SECRET_FILE"},
		{name: "worker settings", env: map[string]string{"GITLEASE_WORKER_ENV": " AGENT_KEY, HTTPS_PROXY ,", "GITLEASE_WORKER_USER": "nobody",
			"GITLEASE_MAX_INFLIGHT_BODY": "100MiB"},
			check: func(t *testing.T, c config) {
				if len(c.WorkerEnv) != 2 || c.WorkerEnv[0] != "AGENT_KEY" || c.WorkerEnv[1] != "HTTPS_PROXY" || c.WorkerUser != "nobody" ||
					c.MaxInflightBody != 100<<20 {
					t.Errorf("worker env %q, user %q, max in-flight body %d", c.WorkerEnv, c.WorkerUser, c.MaxInflightBody)
				}
			}},
		{name: "default in-flight budget", check: func(t *testing.T, c config) {
			if c.MaxInflightBody != 64<<20 {
				t.Errorf("max in-flight body %d, want 64 MiB", c.MaxInflightBody)
			}
		}},
		{name: "in-flight budget below one delivery", env: map[string]string{"GITLEASE_MAX_INFLIGHT_BODY": "1MiB"}, setting: "GITLEASE_MAX_INFLIGHT_BODY"},
		{name: "unknown worker user", env: map[string]string{"GITLEASE_WORKER_USER": "no-such-user-4711"}, setting: "GITLEASE_WORKER_USER"},
		{name: "worker env with a value", env: map[string]string{"GITLEASE_WORKER_ENV": "A=b"}, setting: "GITLEASE_WORKER_ENV"},
		{name: "secret file by flag is hidden from commands", args: []string{"--rpc-token-file=" + tokenFile},
			check: func(t *testing.T, c config) {
				if !slices.Contains(hiddenFromCommands(c.SecretFiles...), tokenFile) {
					t.Errorf("hidden %v, want the RPC token file %s among them", hiddenFromCommands(c.SecretFiles...), tokenFile)
				}
			}},
		{name: "worker sandbox and timeout", env: map[string]string{"GITLEASE_WORKER_SANDBOX": "none", "GITLEASE_WORKER_TIMEOUT": "90s"},
			check: func(t *testing.T, c config) {
				if c.WorkerSandbox != "none" || c.WorkerTimeout != 90*time.Second {
					t.Errorf("sandbox %q, timeout %s", c.WorkerSandbox, c.WorkerTimeout)
				}
			}},
		{name: "unknown sandbox mode", env: map[string]string{"GITLEASE_WORKER_SANDBOX": "bwrap"}, setting: "GITLEASE_WORKER_SANDBOX"},
		{name: "timeout too short", env: map[string]string{"GITLEASE_WORKER_TIMEOUT": "10ms"}, setting: "GITLEASE_WORKER_TIMEOUT"},
		{name: "unknown author association", env: map[string]string{"GITLEASE_ALLOWED_AUTHORS": "OWNER,ADMIN"}, setting: "GITLEASE_ALLOWED_AUTHORS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := loadConfig("serve", tc.args, true, io.Discard)
			var ce *configError
			switch {
			case tc.setting == "" && err != nil:
				t.Fatalf("loadConfig: %v", err)
			case tc.setting != "" && (!errors.As(err, &ce) || ce.Setting != tc.setting):
				t.Fatalf("loadConfig = %v, want a configError naming %s", err, tc.setting)
			case tc.check != nil:
				tc.check(t, c)
			}
		})
	}
}

// TestWarnRootWorker: serve warns, naming GITLEASE_WORKER_USER, only when
// it runs as root with a worker command that would run as root too.
func TestWarnRootWorker(t *testing.T) {
	cases := []struct {
		name string
		euid int
		cfg  config
		warn bool
	}{
		{"root with an unsandboxed command", 0, config{WorkerExec: "./agent", WorkerSlots: 1, WorkerSandbox: "none"}, true},
		{"root with a sandboxed command (run as nobody)", 0, config{WorkerExec: "./agent", WorkerSlots: 1, WorkerSandbox: "auto"}, false},
		{"root with a worker user", 0, config{WorkerExec: "./agent", WorkerSlots: 1, WorkerUser: "agent", WorkerSandbox: "none"}, false},
		{"root without a command", 0, config{WorkerSlots: 1}, false},
		{"root with the worker off", 0, config{WorkerExec: "./agent"}, false},
		{"not root", 1000, config{WorkerExec: "./agent", WorkerSlots: 1}, false},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		warnRootWorker(slog.New(slog.NewTextHandler(&buf, nil)), tc.euid, tc.cfg)
		if got := strings.Contains(buf.String(), "GITLEASE_WORKER_USER"); got != tc.warn {
			t.Errorf("%s: warned %v (%q), want %v", tc.name, got, buf.String(), tc.warn)
		}
	}
}
