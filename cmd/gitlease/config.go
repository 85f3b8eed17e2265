package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"

	"github.com/gitlease/gitlease/app/redeliver"

	"github.com/gitlease/gitlease/app/setup"
	"github.com/gitlease/gitlease/app/worker/sandbox"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/webhook"
)

// errHelp ends a command after it printed its --help.
var errHelp = errors.New("help requested")

// configError names the one setting that stops the process at start.
type configError struct {
	Setting string
	Problem string
}

func (e *configError) Error() string { return e.Setting + ": " + e.Problem }

// config is every setting of docs/configuration.md, read once from the environment and,
// for serve, from flags of the same name.
type config struct {
	DatabaseURL string
	Port        int
	// ListenHost is the address serve listens on ("": every interface);
	// not a setting: dev listens on 127.0.0.1 only.
	ListenHost     string
	AppID          int64
	PrivateKey     app.Secret
	PrivateKeyFile string
	WebhookSecrets []app.Secret
	AppSlug        string
	APIURL         string
	WebURL         string // GITHUB_URL, with a trailing slash
	RPCToken       app.Secret
	RPCWorkerToken app.Secret // GITLEASE_RPC_WORKER_TOKEN: the lease-side methods only
	UIToken        app.Secret // GITLEASE_UI_TOKEN
	UIViewToken    app.Secret // GITLEASE_UI_VIEW_TOKEN
	LeaseTTL       time.Duration
	TriggerLabel   string
	// AllowedAuthors is who may start work (GITLEASE_ALLOWED_AUTHORS).
	AllowedAuthors webhook.AllowedAuthors
	BranchPrefix   string
	WorkerSlots    int
	WorkerExec     string
	Migrate        bool
	PublicURL      string
	// WorkerUser is the OS user worker commands run as ("": serve's own).
	WorkerUser string
	// WorkerEnv names the server's variables passed on to worker commands.
	WorkerEnv []string
	// WorkerSandbox is how worker commands are isolated; WorkerTimeout
	// the longest one runs.
	WorkerSandbox sandbox.Mode
	WorkerTimeout time.Duration
	// SecretFiles are the files secrets were read from (…_FILE, by env
	// or flag), which worker commands must not see.
	SecretFiles []string
	// MaxInflightBody bounds the webhook body bytes held at once.
	MaxInflightBody int64
	// IntakeGroupSize and IntakeGroups shape the intake's group commit
	// (webhook.HandlerConfig.GroupSize, Groups).
	IntakeGroupSize, IntakeGroups int
	// HTTP bounds the HTTP server (docs/http.md); not a setting, tests shorten it.
	HTTP httpBounds
	// GitHubWritesPerSec paces each GitHub credential's writes after a
	// burst of 5; 0 leaves them unpaced.
	GitHubWritesPerSec float64
	// GitHubContentPerHour paces each installation's content-creating
	// requests in a sliding hour (and 80 a minute); 0 leaves them unpaced.
	GitHubContentPerHour int
	// MaxAssignedPerInstallation caps one installation's assigned items
	// over every worker and instance; 0 = no cap.
	MaxAssignedPerInstallation int
	// DeliveryRetention is how long webhook delivery records are kept.
	DeliveryRetention time.Duration
	// RedeliverInterval is the time between redelivery scans (0: none);
	// RedeliverLookback how far back the first one looks (docs/webhook.md).
	RedeliverInterval time.Duration
	RedeliverLookback time.Duration
	// ProgressInterval is how often at most a running command's output is
	// copied into its check run (0: never).
	ProgressInterval time.Duration
}

// setting is one configurable value: its env var, its flag and its help.
// A secret has no flag, so its value never shows in ps (nor in
// /proc/<pid>/cmdline, which non-dumpable does not hide); it is read from
// env or, when file names a variable, from the file that variable names.
type setting struct {
	env, flag, def, help string
	secret               bool
	file                 string
}

var settings = []setting{
	{env: "DATABASE_URL", help: "Postgres connection string (required)", secret: true, file: "DATABASE_URL_FILE"},
	{env: "DATABASE_URL_FILE", flag: "database-url-file", help: "Postgres connection string, path to a file holding it"},
	{env: "PORT", flag: "port", def: "8080", help: "HTTP listen port"},
	{env: "GITHUB_APP_ID", flag: "github-app-id", help: "numeric GitHub App ID (required for GitHub calls)"},
	{env: "GITHUB_PRIVATE_KEY", help: "GitHub App private key, PEM text", secret: true},
	{env: "GITHUB_PRIVATE_KEY_FILE", flag: "github-private-key-file", help: "GitHub App private key, path to a PEM file"},
	{env: "GITHUB_WEBHOOK_SECRET", help: "webhook secret; several, comma-separated, for rotation (required)", secret: true, file: "GITHUB_WEBHOOK_SECRET_FILE"},
	{env: "GITHUB_WEBHOOK_SECRET_FILE", flag: "github-webhook-secret-file", help: "webhook secrets, path to a file holding them"},
	{env: "GITHUB_APP_SLUG", flag: "github-app-slug", help: "the App's slug, to recognise its own bot (default: read from GET /app)"},
	{env: "GITHUB_API_URL", flag: "github-api-url", def: "https://api.github.com/", help: "GitHub REST base URL (GitHub Enterprise Server, tests)"},
	{env: "GITHUB_URL", flag: "github-url", def: "https://github.com/", help: "GitHub web base URL, for the manifest flow and links (GitHub Enterprise Server: https://HOST/)"},
	{env: "GITLEASE_RPC_TOKEN", help: "bearer token for /rpc; unset disables /rpc", secret: true, file: "GITLEASE_RPC_TOKEN_FILE"},
	{env: "GITLEASE_RPC_TOKEN_FILE", flag: "rpc-token-file", help: "bearer token for /rpc, path to a file holding it"},
	{env: "GITLEASE_RPC_WORKER_TOKEN", help: "bearer token for /rpc limited to what a worker needs", secret: true, file: "GITLEASE_RPC_WORKER_TOKEN_FILE"},
	{env: "GITLEASE_RPC_WORKER_TOKEN_FILE", flag: "rpc-worker-token-file", help: "the worker's bearer token for /rpc, path to a file holding it"},
	{env: "GITLEASE_UI_TOKEN", help: "dashboard token with every action; unset disables /ui", secret: true, file: "GITLEASE_UI_TOKEN_FILE"},
	{env: "GITLEASE_UI_TOKEN_FILE", flag: "ui-token-file", help: "the dashboard's admin token, path to a file holding it"},
	{env: "GITLEASE_UI_VIEW_TOKEN", help: "dashboard token, read-only", secret: true, file: "GITLEASE_UI_VIEW_TOKEN_FILE"},
	{env: "GITLEASE_UI_VIEW_TOKEN_FILE", flag: "ui-view-token-file", help: "the dashboard's read-only token, path to a file holding it"},
	{env: "GITLEASE_LEASE_TTL", flag: "lease-ttl", def: "30m", help: "lease time-to-live (Go duration)"},
	{env: "GITLEASE_TRIGGER_LABEL", flag: "trigger-label", help: "if set, only issues/PRs carrying this label are enqueued"},
	{env: "GITLEASE_ALLOWED_AUTHORS", flag: "allowed-authors", def: webhook.DefaultAllowedAuthors, help: "author associations that may start work (issues, pull requests, comment commands); any = everyone"},
	{env: "GITLEASE_BRANCH_PREFIX", flag: "branch-prefix", def: "gitlease/", help: "prefix for branches gitlease creates"},
	{env: "GITLEASE_GITHUB_WRITES_PER_SEC", flag: "github-writes-per-sec", def: "1", help: "GitHub writes per second per credential after a burst of 5 (0 = unpaced)"},
	{env: "GITLEASE_GITHUB_CONTENT_PER_HOUR", flag: "github-content-per-hour", def: "500", help: "content-creating GitHub requests per installation in any hour, and at most 80 in any minute (0 = unpaced)"},
	{env: "GITLEASE_MAX_ASSIGNED_PER_INSTALLATION", flag: "max-assigned-per-installation", def: "0", help: "most items of one GitHub installation assigned at once, over every worker and instance (0 = no cap)"},
	{env: "GITLEASE_WORKER_SLOTS", flag: "worker-slots", def: "5", help: "built-in worker slots (0 disables it; 1..5)"},
	{env: "GITLEASE_WORKER_EXEC", flag: "worker-exec", help: "shell command (sh -c) the built-in worker runs per leased item"},
	{env: "GITLEASE_WORKER_USER", flag: "worker-user", help: "OS user worker commands run as (serve running as root)"},
	{env: "GITLEASE_WORKER_ENV", flag: "worker-env", help: "comma-separated names of server variables passed on to worker commands"},
	{env: "GITLEASE_WORKER_SANDBOX", flag: "worker-sandbox", def: "auto", help: "how worker commands are isolated: auto (bubblewrap; refused where the machine allows none) or none"},
	{env: "GITLEASE_WORKER_TIMEOUT", flag: "worker-timeout", def: "1h", help: "the longest a worker command runs; then it is ended and its item fails (Go duration)"},
	{env: "GITLEASE_MAX_INFLIGHT_BODY", flag: "max-inflight-body", def: "64MiB", help: "webhook body bytes held at once, all requests together; past it 503"},
	{env: "GITLEASE_INTAKE_GROUP_SIZE", flag: "intake-group-size", def: "8", help: "most webhook deliveries recorded in one transaction when they arrive together (1 = each alone; 1..64)"},
	{env: "GITLEASE_INTAKE_GROUPS", flag: "intake-groups", def: "2", help: "most such transactions at once (1..16)"},
	{env: "GITLEASE_MIGRATE", flag: "migrate", def: "true", help: "apply migrations at start"},
	{env: "GITLEASE_DELIVERY_RETENTION", flag: "delivery-retention", def: "720h", help: "how long webhook delivery records are kept (Go duration, at least 72h)"},
	{env: "GITLEASE_REDELIVER_INTERVAL", flag: "redeliver-interval", def: "5m", help: "how often the redelivery reconciler scans GitHub's delivery log (0 disables it)"},
	{env: "GITLEASE_REDELIVER_LOOKBACK", flag: "redeliver-lookback", def: "72h", help: "how far back the first redelivery scan looks (at most 72h)"},
	{env: "GITLEASE_PROGRESS_INTERVAL", flag: "progress-interval", def: "30s", help: "how often at most a running command's output is copied into its check run (0 turns it off)"},
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
		if withFlags && s.flag != "" {
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
	from := map[string]string{} // the variable each secret's value came from
	var secretFiles []string    // as given by env or flag
	for _, s := range settings {
		if s.file == "" {
			continue
		}
		v, src, err := readSecret(s.env, *values[s.env], s.file, get(s.file))
		if err != nil {
			return config{}, err
		}
		values[s.env], from[s.env] = &v, src
		if f := get(s.file); f != "" {
			secretFiles = append(secretFiles, f)
		}
	}
	for _, w := range want {
		if get(w) == "" {
			return config{}, &configError{Setting: w, Problem: "required but not set"}
		}
	}
	var c config
	var err error
	c.DatabaseURL = get("DATABASE_URL")
	if c.DatabaseURL != "" {
		if _, err := db.PoolConfig(c.DatabaseURL); err != nil {
			problem := "not a valid Postgres connection string"
			var uerr *db.URLError
			if errors.As(err, &uerr) {
				problem = uerr.Problem
			}
			return c, &configError{Setting: "DATABASE_URL", Problem: problem}
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
	c.SecretFiles = append(secretFiles, c.PrivateKeyFile)
	if c.PrivateKey != "" && c.PrivateKeyFile != "" {
		return c, &configError{Setting: "GITHUB_PRIVATE_KEY", Problem: "set either it or GITHUB_PRIVATE_KEY_FILE, not both"}
	}
	for i, s := range strings.Split(*values["GITHUB_WEBHOOK_SECRET"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			if err := checkSecretLength(from["GITHUB_WEBHOOK_SECRET"], s, i+1); err != nil {
				return c, err
			}
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
	c.WebURL = get("GITHUB_URL")
	if u, err := url.Parse(c.WebURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return c, &configError{Setting: "GITHUB_URL", Problem: fmt.Sprintf("%q is not an http(s) URL", c.WebURL)}
	}
	if !strings.HasSuffix(c.WebURL, "/") {
		c.WebURL += "/"
	}
	for _, t := range []struct {
		env string
		to  *app.Secret
	}{{"GITLEASE_RPC_TOKEN", &c.RPCToken}, {"GITLEASE_RPC_WORKER_TOKEN", &c.RPCWorkerToken},
		{"GITLEASE_UI_TOKEN", &c.UIToken}, {"GITLEASE_UI_VIEW_TOKEN", &c.UIViewToken}} {
		v := get(t.env)
		if err := checkSecretLength(from[t.env], v, 0); err != nil {
			return c, err
		}
		*t.to = app.Secret(v)
	}
	if c.RPCWorkerToken != "" && c.RPCWorkerToken == c.RPCToken {
		return c, &configError{Setting: "GITLEASE_RPC_WORKER_TOKEN", Problem: "must differ from GITLEASE_RPC_TOKEN"}
	}
	if err := checkUITokens(c); err != nil {
		return c, err
	}
	if c.LeaseTTL, err = time.ParseDuration(get("GITLEASE_LEASE_TTL")); err != nil || c.LeaseTTL < time.Second {
		return c, &configError{Setting: "GITLEASE_LEASE_TTL", Problem: fmt.Sprintf("%q is not a Go duration of at least 1s", get("GITLEASE_LEASE_TTL"))}
	}
	c.TriggerLabel = get("GITLEASE_TRIGGER_LABEL")
	if c.AllowedAuthors, err = webhook.ParseAllowedAuthors(get("GITLEASE_ALLOWED_AUTHORS")); err != nil {
		return c, &configError{Setting: webhook.AuthorsSetting, Problem: err.Error()}
	}
	c.BranchPrefix = get("GITLEASE_BRANCH_PREFIX")
	if c.GitHubWritesPerSec, err = strconv.ParseFloat(get("GITLEASE_GITHUB_WRITES_PER_SEC"), 64); err != nil || c.GitHubWritesPerSec < 0 || c.GitHubWritesPerSec > 1000 {
		return c, &configError{Setting: "GITLEASE_GITHUB_WRITES_PER_SEC", Problem: fmt.Sprintf("%q is not a number from 0 to 1000", get("GITLEASE_GITHUB_WRITES_PER_SEC"))}
	}
	if c.GitHubContentPerHour, err = strconv.Atoi(get("GITLEASE_GITHUB_CONTENT_PER_HOUR")); err != nil || c.GitHubContentPerHour < 0 || c.GitHubContentPerHour > 1_000_000 {
		return c, &configError{Setting: "GITLEASE_GITHUB_CONTENT_PER_HOUR", Problem: fmt.Sprintf("%q is not a whole number from 0 to 1000000", get("GITLEASE_GITHUB_CONTENT_PER_HOUR"))}
	}
	if c.MaxAssignedPerInstallation, err = strconv.Atoi(get("GITLEASE_MAX_ASSIGNED_PER_INSTALLATION")); err != nil || c.MaxAssignedPerInstallation < 0 || c.MaxAssignedPerInstallation > 1_000_000 {
		return c, &configError{Setting: "GITLEASE_MAX_ASSIGNED_PER_INSTALLATION", Problem: fmt.Sprintf("%q is not a whole number from 0 to 1000000", get("GITLEASE_MAX_ASSIGNED_PER_INSTALLATION"))}
	}
	if c.WorkerSlots, err = strconv.Atoi(get("GITLEASE_WORKER_SLOTS")); err != nil || c.WorkerSlots < 0 || c.WorkerSlots > 5 {
		return c, &configError{Setting: "GITLEASE_WORKER_SLOTS", Problem: fmt.Sprintf("%q is not a number from 0 to 5", get("GITLEASE_WORKER_SLOTS"))}
	}
	c.WorkerExec = *values["GITLEASE_WORKER_EXEC"]
	if c.WorkerUser = get("GITLEASE_WORKER_USER"); c.WorkerUser != "" {
		if _, err := user.Lookup(c.WorkerUser); err != nil {
			if _, err := user.LookupId(c.WorkerUser); err != nil {
				return c, &configError{Setting: "GITLEASE_WORKER_USER", Problem: fmt.Sprintf("no user %q on this machine", c.WorkerUser)}
			}
		}
	}
	for _, n := range strings.Split(get("GITLEASE_WORKER_ENV"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			if strings.ContainsAny(n, "= ") {
				return c, &configError{Setting: "GITLEASE_WORKER_ENV", Problem: fmt.Sprintf("%q is not a variable name", n)}
			}
			c.WorkerEnv = append(c.WorkerEnv, n)
		}
	}
	if c.WorkerSandbox, err = sandbox.ParseMode(get(sandbox.Setting)); err != nil {
		return c, &configError{Setting: sandbox.Setting, Problem: err.Error()}
	}
	if c.WorkerTimeout, err = time.ParseDuration(get("GITLEASE_WORKER_TIMEOUT")); err != nil || c.WorkerTimeout < time.Second {
		return c, &configError{Setting: "GITLEASE_WORKER_TIMEOUT", Problem: fmt.Sprintf("%q is not a Go duration of at least 1s", get("GITLEASE_WORKER_TIMEOUT"))}
	}
	if n, err := humanize.ParseBytes(get("GITLEASE_MAX_INFLIGHT_BODY")); err != nil || n < 25<<20 || n > 1<<40 {
		return c, &configError{Setting: "GITLEASE_MAX_INFLIGHT_BODY", Problem: fmt.Sprintf("%q is not a size from 25MiB (the largest delivery) to 1TiB, e.g. 64MiB", get("GITLEASE_MAX_INFLIGHT_BODY"))}
	} else {
		c.MaxInflightBody = int64(n)
	}
	if c.IntakeGroupSize, err = strconv.Atoi(get("GITLEASE_INTAKE_GROUP_SIZE")); err != nil || c.IntakeGroupSize < 1 || c.IntakeGroupSize > 64 {
		return c, &configError{Setting: "GITLEASE_INTAKE_GROUP_SIZE", Problem: fmt.Sprintf("%q is not a number from 1 to 64", get("GITLEASE_INTAKE_GROUP_SIZE"))}
	}
	if c.IntakeGroups, err = strconv.Atoi(get("GITLEASE_INTAKE_GROUPS")); err != nil || c.IntakeGroups < 1 || c.IntakeGroups > 16 {
		return c, &configError{Setting: "GITLEASE_INTAKE_GROUPS", Problem: fmt.Sprintf("%q is not a number from 1 to 16", get("GITLEASE_INTAKE_GROUPS"))}
	}
	if c.Migrate, err = strconv.ParseBool(get("GITLEASE_MIGRATE")); err != nil {
		return c, &configError{Setting: "GITLEASE_MIGRATE", Problem: fmt.Sprintf("%q is not true or false", get("GITLEASE_MIGRATE"))}
	}
	if c.DeliveryRetention, err = time.ParseDuration(get("GITLEASE_DELIVERY_RETENTION")); err != nil || c.DeliveryRetention <= 0 {
		return c, &configError{Setting: "GITLEASE_DELIVERY_RETENTION", Problem: fmt.Sprintf("%q is not a positive Go duration", get("GITLEASE_DELIVERY_RETENTION"))}
	}
	// A delivery record pruned while GitHub still lists the delivery would
	// make the redelivery reconciler request it again.
	logRetention := c.deliveryLogRetention()
	if c.DeliveryRetention < logRetention {
		return c, &configError{Setting: "GITLEASE_DELIVERY_RETENTION", Problem: fmt.Sprintf("%s is shorter than %s: delivery records must outlive GitHub's delivery log", c.DeliveryRetention, logRetention)}
	}
	if c.RedeliverInterval, err = time.ParseDuration(get("GITLEASE_REDELIVER_INTERVAL")); err != nil || c.RedeliverInterval < 0 {
		return c, &configError{Setting: "GITLEASE_REDELIVER_INTERVAL", Problem: fmt.Sprintf("%q is not a Go duration of 0 or more", get("GITLEASE_REDELIVER_INTERVAL"))}
	}
	if c.ProgressInterval, err = time.ParseDuration(get("GITLEASE_PROGRESS_INTERVAL")); err != nil || (c.ProgressInterval != 0 && c.ProgressInterval < time.Second) {
		return c, &configError{Setting: "GITLEASE_PROGRESS_INTERVAL", Problem: fmt.Sprintf("%q is not 0 nor a Go duration of at least 1s", get("GITLEASE_PROGRESS_INTERVAL"))}
	}
	if c.RedeliverLookback, err = time.ParseDuration(get("GITLEASE_REDELIVER_LOOKBACK")); err != nil || c.RedeliverLookback <= 0 || c.RedeliverLookback > logRetention {
		return c, &configError{Setting: "GITLEASE_REDELIVER_LOOKBACK", Problem: fmt.Sprintf("%q is not a Go duration from 1ns to %s (how long GitHub keeps deliveries)", get("GITLEASE_REDELIVER_LOOKBACK"), logRetention)}
	}
	if v := get("GITLEASE_PUBLIC_URL"); v != "" {
		if c.PublicURL, err = setup.ParsePublicURL(v); err != nil {
			return c, &configError{Setting: "GITLEASE_PUBLIC_URL", Problem: err.Error()}
		}
	}
	return c, nil
}

// minSecretLen is the fewest characters a token or a webhook secret may
// have (SPEC §3): shorter ones are refused at start.
const minSecretLen = 16

// readSecret resolves a secret setting: its value as the variable env
// holds it, or else the content of the file at path (the variable file
// names it), trimmed. Setting both is refused. from is the variable the
// value came from, for errors that must name it.
func readSecret(env, value, file, path string) (v, from string, err error) {
	value = strings.TrimSpace(value)
	switch {
	case path == "":
		return value, env, nil
	case value != "":
		return "", env, &configError{Setting: env, Problem: "set either it or " + file + ", not both"}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", file, &configError{Setting: file, Problem: "cannot read the file: " + err.Error()}
	}
	return strings.TrimSpace(string(b)), file, nil
}

// checkSecretLength refuses a set secret shorter than minSecretLen,
// naming the variable it came from and, in a rotation list (nth > 0),
// which of its secrets; it never shows the value.
func checkSecretLength(from, v string, nth int) error {
	if v == "" || utf8.RuneCountInString(v) >= minSecretLen {
		return nil
	}
	problem := fmt.Sprintf("must be at least %d characters", minSecretLen)
	if nth > 0 {
		problem = fmt.Sprintf("secret %d of the list is shorter than %d characters", nth, minSecretLen)
	}
	return &configError{Setting: from, Problem: problem}
}

// secretFileSettings name the files that hold secrets; no worker command
// may see them.
var secretFileSettings = []string{"GITHUB_PRIVATE_KEY_FILE", "GITHUB_WEBHOOK_SECRET_FILE", "GITLEASE_RPC_TOKEN_FILE",
	"GITLEASE_RPC_WORKER_TOKEN_FILE", "GITLEASE_UI_TOKEN_FILE", "GITLEASE_UI_VIEW_TOKEN_FILE", "DATABASE_URL_FILE"}

// hiddenFromCommands lists the server's paths worker commands must not
// see (SPEC §8.2): its working directory (with .gitlease/) and every
// secret file named in the environment or by extra, made absolute.
func hiddenFromCommands(extra ...string) []string {
	var out []string
	add := func(p string) {
		if strings.TrimSpace(p) == "" {
			return
		}
		if abs, err := filepath.Abs(p); err == nil && !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	if wd, err := os.Getwd(); err == nil {
		add(wd)
		add(filepath.Join(wd, ".gitlease"))
	}
	for _, n := range secretFileSettings {
		add(os.Getenv(n))
	}
	for _, p := range extra {
		add(p)
	}
	return out
}

// deliveryLogRetention is how long the configured GitHub keeps webhook
// deliveries: 7 days on GitHub Enterprise Server (an API URL ending in
// /api/v3/, as every GHES's does), 3 on github.com.
func (c config) deliveryLogRetention() time.Duration {
	if strings.HasSuffix(c.APIURL, "/api/v3/") {
		return redeliver.EnterpriseLogRetention
	}
	return redeliver.MaxRedeliverLookback
}
