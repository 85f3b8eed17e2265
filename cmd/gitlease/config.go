package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gitlease/gitlease/app/setup"

	"github.com/gitlease/gitlease/app"
)

// errHelp ends a command after it printed its --help.
var errHelp = errors.New("help requested")

// configError names the one setting that stops the process at start.
type configError struct {
	Setting string
	Problem string
}

func (e *configError) Error() string { return e.Setting + ": " + e.Problem }

// config is every setting of SPEC §3, read once from the environment and,
// for serve, from flags of the same name.
type config struct {
	DatabaseURL    string
	Port           int
	AppID          int64
	PrivateKey     app.Secret
	PrivateKeyFile string
	WebhookSecrets []app.Secret
	AppSlug        string
	APIURL         string
	RPCToken       app.Secret
	LeaseTTL       time.Duration
	TriggerLabel   string
	BranchPrefix   string
	WorkerSlots    int
	WorkerExec     string
	Migrate        bool
	PublicURL      string
	// GitHubWritesPerSec paces each GitHub credential's writes after a
	// burst of 5; 0 leaves them unpaced.
	GitHubWritesPerSec float64
	// DeliveryRetention is how long webhook delivery records are kept.
	DeliveryRetention time.Duration
}

// setting is one configurable value: its env var, its flag and its help.
type setting struct {
	env, flag, def, help string
	secret               bool
}

var settings = []setting{
	{env: "DATABASE_URL", flag: "database-url", help: "Postgres connection string (required)", secret: true},
	{env: "PORT", flag: "port", def: "8080", help: "HTTP listen port"},
	{env: "GITHUB_APP_ID", flag: "github-app-id", help: "numeric GitHub App ID (required for GitHub calls)"},
	{env: "GITHUB_PRIVATE_KEY", flag: "github-private-key", help: "GitHub App private key, PEM text", secret: true},
	{env: "GITHUB_PRIVATE_KEY_FILE", flag: "github-private-key-file", help: "GitHub App private key, path to a PEM file"},
	{env: "GITHUB_WEBHOOK_SECRET", flag: "github-webhook-secret", help: "webhook secret; several, comma-separated, for rotation (required)", secret: true},
	{env: "GITHUB_APP_SLUG", flag: "github-app-slug", help: "the App's slug, to recognise its own bot (default: read from GET /app)"},
	{env: "GITHUB_API_URL", flag: "github-api-url", def: "https://api.github.com/", help: "GitHub REST base URL (GitHub Enterprise Server, tests)"},
	{env: "GITLEASE_RPC_TOKEN", flag: "rpc-token", help: "bearer token for /rpc; unset disables /rpc", secret: true},
	{env: "GITLEASE_LEASE_TTL", flag: "lease-ttl", def: "30m", help: "lease time-to-live (Go duration)"},
	{env: "GITLEASE_TRIGGER_LABEL", flag: "trigger-label", help: "if set, only issues/PRs carrying this label are enqueued"},
	{env: "GITLEASE_BRANCH_PREFIX", flag: "branch-prefix", def: "gitlease/", help: "prefix for branches gitlease creates"},
	{env: "GITLEASE_GITHUB_WRITES_PER_SEC", flag: "github-writes-per-sec", def: "1", help: "GitHub writes per second per credential after a burst of 5 (0 = unpaced)"},
	{env: "GITLEASE_WORKER_SLOTS", flag: "worker-slots", def: "5", help: "built-in worker slots (0 disables it; 1..5)"},
	{env: "GITLEASE_WORKER_EXEC", flag: "worker-exec", help: "shell command (sh -c) the built-in worker runs per leased item"},
	{env: "GITLEASE_MIGRATE", flag: "migrate", def: "true", help: "apply migrations at start"},
	{env: "GITLEASE_DELIVERY_RETENTION", flag: "delivery-retention", def: "720h", help: "how long webhook delivery records are kept (Go duration)"},
	{env: "GITLEASE_PUBLIC_URL", flag: "public-url", help: "the server's public base URL, for the GitHub App manifest at /setup (default: from each request's Host)"},
}

// loadConfig reads the settings from env, then flags (serve only). want
// lists the env names that must be present.
func loadConfig(name string, args []string, withFlags bool, stderr io.Writer, want ...string) (config, error) {
	values := map[string]*string{}
	fs := flag.NewFlagSet("gitlease "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, s := range settings {
		v := s.def
		if env, ok := os.LookupEnv(s.env); ok {
			v = env
		}
		val := v
		values[s.env] = &val
		if withFlags {
			help := fmt.Sprintf("%s (env %s)", s.help, s.env)
			if s.def != "" {
				help += fmt.Sprintf(" (default %q)", s.def)
			}
			fs.Func(s.flag, help, func(x string) error { val = x; return nil })
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, errHelp
		}
		return config{}, &configError{Setting: "flags", Problem: err.Error()}
	}
	get := func(env string) string { return strings.TrimSpace(*values[env]) }
	for _, w := range want {
		if get(w) == "" {
			return config{}, &configError{Setting: w, Problem: "required but not set"}
		}
	}
	var c config
	var err error
	c.DatabaseURL = get("DATABASE_URL")
	if c.DatabaseURL != "" {
		if _, err := url.Parse(c.DatabaseURL); err != nil {
			return c, &configError{Setting: "DATABASE_URL", Problem: "not a valid connection URL"}
		}
	}
	if c.Port, err = strconv.Atoi(get("PORT")); err != nil || c.Port < 0 || c.Port > 65535 {
		return c, &configError{Setting: "PORT", Problem: fmt.Sprintf("%q is not a port number", get("PORT"))}
	}
	if v := get("GITHUB_APP_ID"); v != "" {
		if c.AppID, err = strconv.ParseInt(v, 10, 64); err != nil || c.AppID <= 0 {
			return c, &configError{Setting: "GITHUB_APP_ID", Problem: fmt.Sprintf("%q is not a numeric App ID", v)}
		}
	}
	c.PrivateKey = app.Secret(*values["GITHUB_PRIVATE_KEY"])
	c.PrivateKeyFile = get("GITHUB_PRIVATE_KEY_FILE")
	if c.PrivateKey != "" && c.PrivateKeyFile != "" {
		return c, &configError{Setting: "GITHUB_PRIVATE_KEY", Problem: "set either it or GITHUB_PRIVATE_KEY_FILE, not both"}
	}
	for _, s := range strings.Split(*values["GITHUB_WEBHOOK_SECRET"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.WebhookSecrets = append(c.WebhookSecrets, app.Secret(s))
		}
	}
	c.AppSlug = get("GITHUB_APP_SLUG")
	c.APIURL = get("GITHUB_API_URL")
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, &configError{Setting: "GITHUB_API_URL", Problem: fmt.Sprintf("%q is not an http(s) URL", c.APIURL)}
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	c.RPCToken = app.Secret(get("GITLEASE_RPC_TOKEN"))
	if c.LeaseTTL, err = time.ParseDuration(get("GITLEASE_LEASE_TTL")); err != nil || c.LeaseTTL < time.Second {
		return c, &configError{Setting: "GITLEASE_LEASE_TTL", Problem: fmt.Sprintf("%q is not a Go duration of at least 1s", get("GITLEASE_LEASE_TTL"))}
	}
	c.TriggerLabel = get("GITLEASE_TRIGGER_LABEL")
	c.BranchPrefix = get("GITLEASE_BRANCH_PREFIX")
	if c.GitHubWritesPerSec, err = strconv.ParseFloat(get("GITLEASE_GITHUB_WRITES_PER_SEC"), 64); err != nil || c.GitHubWritesPerSec < 0 || c.GitHubWritesPerSec > 1000 {
		return c, &configError{Setting: "GITLEASE_GITHUB_WRITES_PER_SEC", Problem: fmt.Sprintf("%q is not a number from 0 to 1000", get("GITLEASE_GITHUB_WRITES_PER_SEC"))}
	}
	if c.WorkerSlots, err = strconv.Atoi(get("GITLEASE_WORKER_SLOTS")); err != nil || c.WorkerSlots < 0 || c.WorkerSlots > 5 {
		return c, &configError{Setting: "GITLEASE_WORKER_SLOTS", Problem: fmt.Sprintf("%q is not a number from 0 to 5", get("GITLEASE_WORKER_SLOTS"))}
	}
	c.WorkerExec = *values["GITLEASE_WORKER_EXEC"]
	if c.Migrate, err = strconv.ParseBool(get("GITLEASE_MIGRATE")); err != nil {
		return c, &configError{Setting: "GITLEASE_MIGRATE", Problem: fmt.Sprintf("%q is not true or false", get("GITLEASE_MIGRATE"))}
	}
	if c.DeliveryRetention, err = time.ParseDuration(get("GITLEASE_DELIVERY_RETENTION")); err != nil || c.DeliveryRetention <= 0 {
		return c, &configError{Setting: "GITLEASE_DELIVERY_RETENTION", Problem: fmt.Sprintf("%q is not a positive Go duration", get("GITLEASE_DELIVERY_RETENTION"))}
	}
	if v := get("GITLEASE_PUBLIC_URL"); v != "" {
		if c.PublicURL, err = setup.ParsePublicURL(v); err != nil {
			return c, &configError{Setting: "GITLEASE_PUBLIC_URL", Problem: err.Error()}
		}
	}
	return c, nil
}
