// Package github talks to GitHub as the App: it owns the installation
// clients (Installations), the per-credential call limiter every call of
// the process passes (item tokens included), item tokens scoped to
// one repository, and the App's bot identity. It promises one reading of a
// failed call (Classify) and one backoff (BackOff, Retry) for every caller,
// and it owns no table.
package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v66/github"
)

// Config is what gitlease needs to act as its GitHub App.
type Config struct {
	AppID      int64
	PrivateKey []byte // PEM
	// APIURL is the REST base URL with a trailing slash
	// (https://api.github.com/, or GitHub Enterprise Server's /api/v3/).
	APIURL string
	// Slug, if set, names the App's bot (<slug>[bot]) without asking GET /app.
	Slug string
	// Transport carries every GitHub request, under the limiter;
	// http.DefaultTransport when nil.
	Transport http.RoundTripper
	// WritesPerSec paces each credential's writes after a burst of 5
	// (GITLEASE_GITHUB_WRITES_PER_SEC); 0 leaves them unpaced.
	WritesPerSec float64
	// ContentPerHour paces each installation's content-creating requests
	// in a sliding hour, and 80 a minute (GITLEASE_GITHUB_CONTENT_PER_HOUR);
	// 0 leaves them unpaced.
	ContentPerHour int
	// Budgets, if set, is told each installation's budget and limits.
	Budgets BudgetRecorder
	// Retries retries one call in place after a transient failure.
	Retries Retries
}

// Installations creates GitHub clients for the App and its installations:
// one App JWT transport, and one cached token transport per installation
// (ghinstallation refreshes each token before it expires), all over one
// limiter, so every call of the process (token refreshes included) keeps
// its credential's limits. It is safe for concurrent use.
type Installations struct {
	apiURL  *url.URL
	apps    *ghinstallation.AppsTransport
	retries Retries

	mu   sync.Mutex
	byID map[int64]*ghinstallation.Transport
	slug string
}

// NewInstallations validates cfg and returns the client factory. It
// returns an error for an API URL that is not a URL, a private key that
// does not load, or a negative WritesPerSec.
func NewInstallations(cfg Config) (*Installations, error) {
	u, err := url.Parse(cfg.APIURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("GitHub API URL %q is not a URL", cfg.APIURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	limits, err := newLimiter(cfg.Transport, cfg.WritesPerSec, cfg.ContentPerHour, cfg.Budgets)
	if err != nil {
		return nil, err
	}
	cfg.Retries.defaults()
	apps, err := ghinstallation.NewAppsTransport(limits, cfg.AppID, cfg.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("load GitHub App private key: %w", err)
	}
	apps.BaseURL = strings.TrimSuffix(u.String(), "/")
	return &Installations{apiURL: u, apps: apps, retries: cfg.Retries, byID: map[int64]*ghinstallation.Transport{}, slug: cfg.Slug}, nil
}

// Retries is how the clients' callers retry one call in place (Retry).
func (in *Installations) Retries() Retries { return in.retries }

// requestTimeout bounds one GitHub API call from the moment the limiter
// starts it, so a claimed outbox row never outlives its claim waiting on a
// stuck connection.
const requestTimeout = 10 * time.Second

func (in *Installations) newClient(rt http.RoundTripper) *gh.Client {
	// No http.Client timeout: it would count the wait for a write's turn.
	// The limiter bounds each call instead.
	c := gh.NewClient(&http.Client{Transport: rt})
	c.BaseURL = in.apiURL
	return c
}

// AppClient returns a client authenticated as the App itself (JWT).
func (in *Installations) AppClient() *gh.Client { return in.newClient(in.apps) }

func (in *Installations) transport(installationID int64) (*ghinstallation.Transport, error) {
	if installationID <= 0 {
		return nil, errors.New("no GitHub installation for this item")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	tr, ok := in.byID[installationID]
	if !ok {
		tr = ghinstallation.NewFromAppsTransport(in.apps, installationID)
		tr.BaseURL = in.apps.BaseURL
		in.byID[installationID] = tr
	}
	return tr, nil
}

// Client returns a client authenticated as the installation.
func (in *Installations) Client(installationID int64) (*gh.Client, error) {
	tr, err := in.transport(installationID)
	if err != nil {
		return nil, err
	}
	return in.newClient(asInstallation{id: installationID, next: tr}), nil
}

// Token returns a current installation access token, for handing to a
// worker command as GITHUB_TOKEN.
func (in *Installations) Token(ctx context.Context, installationID int64) (string, error) {
	tr, err := in.transport(installationID)
	if err != nil {
		return "", err
	}
	tok, err := tr.Token(context.WithValue(ctx, installationKey{}, installationID))
	if err != nil {
		return "", fmt.Errorf("get installation %d token: %w", installationID, err)
	}
	return tok, nil
}

// BotLogin is the login of the App's bot account, <slug>[bot]. The slug
// comes from the configuration or, once, from GET /app.
func (in *Installations) BotLogin(ctx context.Context) (string, error) {
	in.mu.Lock()
	slug := in.slug
	in.mu.Unlock()
	if slug == "" {
		app, err := Retry(ctx, in.retries, func(int, bool) (*gh.App, error) {
			app, _, err := in.AppClient().Apps.Get(ctx, "")
			return app, err
		})
		if err != nil {
			return "", fmt.Errorf("read the App's slug (GET /app): %w", err)
		}
		slug = app.GetSlug()
		in.mu.Lock()
		in.slug = slug
		in.mu.Unlock()
	}
	return slug + "[bot]", nil
}

// PullRequest fetches a pull request as the installation (for comment
// commands on pull requests).
func (in *Installations) PullRequest(ctx context.Context, installationID int64, owner, repo string, number int) (*gh.PullRequest, error) {
	c, err := in.Client(installationID)
	if err != nil {
		return nil, err
	}
	pr, err := Retry(ctx, in.retries, func(int, bool) (*gh.PullRequest, error) {
		pr, _, err := c.PullRequests.Get(ctx, owner, repo, number)
		return pr, err
	})
	if err != nil {
		return nil, fmt.Errorf("get pull request %s/%s#%d: %w", owner, repo, number, err)
	}
	return pr, nil
}
