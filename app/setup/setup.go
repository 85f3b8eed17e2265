package setup

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/labstack/echo/v4"
)

const (
	// SetupStateTTL is how long a state issued by GET /setup is accepted by
	// GET /setup/callback. GitHub's manifest codes live an hour too.
	SetupStateTTL = time.Hour
	// maxSetupStates bounds the states kept in memory, so a client that
	// reloads /setup in a loop cannot grow them without limit.
	maxSetupStates = 1000
	// exchangeTimeout bounds the code exchange with GitHub.
	exchangeTimeout = 30 * time.Second
)

var (
	// manifestCode is what a manifest code may look like: GitHub's are short
	// hex strings; anything else never reaches the exchange URL.
	manifestCode = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	// accountName is a GitHub user or organization login.
	accountName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
)

// Config configures the GitHub App manifest flow served by Setup.
type Config struct {
	// ManifestYAML is the App manifest, manifest.yml, with URLPlaceholder
	// standing for the public URL. Required.
	ManifestYAML []byte
	// PublicURL is the server's public base URL written into the manifest.
	// Empty means it is derived from each request's Host and
	// X-Forwarded-Proto.
	PublicURL string
	// APIURL is GitHub's REST base URL, ending in "/". Empty means
	// https://api.github.com/.
	APIURL string
	// WebURL is GitHub's web base URL (GITHUB_URL; on GitHub Enterprise
	// Server https://HOST/), where the registration form posts. Empty means
	// https://github.com/.
	WebURL string
	// AppConfigured says this server already runs with App credentials
	// (GITHUB_APP_ID is set): every /setup path then answers 404, so that
	// nobody can register a second App through it or probe the flow.
	AppConfigured bool
	// HTTPClient makes the code exchange. Nil means a client with a 30 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock for state expiry. Nil means time.Now.
	Now func() time.Time
}

// Setup serves GitHub's "register a GitHub App from a manifest" flow:
// GET /setup shows a page whose button posts the manifest to GitHub, and
// GET /setup/callback exchanges the code GitHub redirects back with for the
// new App's credentials and shows them once. It remembers the states it
// issued, in memory, for SetupStateTTL, each bound to the browser it was
// issued to (an HttpOnly, SameSite=Lax cookie); a callback with any other
// state, or from another browser, is refused, and so is an App whose
// permissions or events are not the manifest's. It is safe for concurrent
// use.
type Server struct {
	cfg       Config
	publicURL string // cfg.PublicURL normalised, or empty
	webURL    string // GitHub's web interface without a trailing slash, for the registration form
	apiURL    *url.URL
	logger    *slog.Logger
	pages     *template.Template
	grants    manifestGrants // what the created App must have

	mu     sync.Mutex
	states map[string]issuedState
}

// issuedState is when a state was issued, and to which browser.
type issuedState struct {
	at      time.Time
	browser string
}

// New returns the manifest flow for cfg. It returns an error when the
// manifest does not render, or PublicURL, APIURL or WebURL is not a valid URL.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api.github.com/"
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: exchangeTimeout}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, logger: logger, states: map[string]issuedState{}}
	var err error
	if cfg.PublicURL != "" {
		if s.publicURL, err = ParsePublicURL(cfg.PublicURL); err != nil {
			return nil, fmt.Errorf("setup: public URL: %w", err)
		}
	}
	if s.webURL, err = parseWebURL(cmp.Or(cfg.WebURL, "https://github.com/")); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if s.apiURL, err = url.Parse(cfg.APIURL); err != nil {
		return nil, fmt.Errorf("setup: GitHub API URL: %w", err)
	}
	rendered, err := RenderManifest(cfg.ManifestYAML, "https://gitlease.invalid")
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if s.grants, err = grantsOf(rendered); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if s.pages, err = template.New("setup").Parse(setupPages); err != nil {
		return nil, fmt.Errorf("setup: parse pages: %w", err)
	}
	return s, nil
}

// Register adds GET /setup and GET /setup/callback to e, or, once the App
// is configured, a 404 for every /setup path. The flow reads no form: its
// pages are GETs, and other methods are refused before a body is read.
func (s *Server) Register(e *echo.Echo) {
	if s.cfg.AppConfigured {
		notFound := func(c echo.Context) error { return c.String(http.StatusNotFound, "404 page not found\n") }
		e.Any("/setup", notFound)
		e.Any("/setup/*", notFound)
		return
	}
	e.GET("/setup", s.start)
	e.GET("/setup/callback", s.callback)
}

// setupPage is the data of every page the flow renders.
type setupPage struct {
	Title   string
	Message string // error pages

	// GET /setup
	PublicURL      string
	Derived        bool // PublicURL came from the request, not configuration
	PlainHTTP      bool
	Action         string // where the form posts
	Manifest       string // the manifest JSON, on one line, for the form
	ManifestPretty string // the same, indented, for people
	Org, Name      string

	// GET /setup/callback
	App           appCredentials
	InstallURL    string
	SecretsCmd    string
	ReadyzURL     string
	HasWebhookKey bool
}

// appCredentials is what the code exchange returned that the page shows.
type appCredentials struct {
	ID            int64
	Slug, Name    string
	Owner         string
	HTMLURL       string
	WebhookSecret string
	PEM           string
}

// start serves GET /setup: a page with the manifest and a button that posts
// it to GitHub with a freshly issued state. ?org=LOGIN registers the App
// under an organization; ?name=NAME changes the App's name (App names are
// unique on GitHub).
func (s *Server) start(c echo.Context) error {
	base, derived, err := s.baseURL(c)
	if err != nil {
		return s.fail(c, http.StatusBadRequest, "Cannot tell this server's public URL",
			"The request carries no usable Host header. Set GITLEASE_PUBLIC_URL to the URL GitHub should call, and reload.")
	}
	org := strings.TrimSpace(c.QueryParam("org"))
	if org != "" && !accountName.MatchString(org) {
		return s.fail(c, http.StatusBadRequest, "Not an organization name",
			"An organization login has up to 39 letters, digits and hyphens, and does not start with a hyphen.")
	}
	name := strings.TrimSpace(c.QueryParam("name"))
	if len(name) > 34 {
		return s.fail(c, http.StatusBadRequest, "App name too long",
			"GitHub App names have at most 34 characters.")
	}
	manifest, err := renderManifest(s.cfg.ManifestYAML, base, name)
	if err != nil {
		s.logger.Error("setup: render the App manifest", "err", err)
		return s.fail(c, http.StatusInternalServerError, "The App manifest is broken",
			"This build's manifest.yml does not render; the server log says why.")
	}
	browser, _, err := browserID(c)
	var state string
	if err == nil {
		state, err = s.issueState(browser)
	}
	if err != nil {
		s.logger.Error("setup: issue a state", "err", err)
		return s.fail(c, http.StatusInternalServerError, "Cannot start the setup",
			"The server could not generate a random state; the server log says why.")
	}
	action := s.webURL + "/settings/apps/new"
	if org != "" {
		action = s.webURL + "/organizations/" + url.PathEscape(org) + "/settings/apps/new"
	}
	action += "?" + url.Values{"state": {state}}.Encode()
	setBrowserCookie(c, browser, base)
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, manifest, "", "  ") // manifest is valid JSON
	return s.render(c, http.StatusOK, "start", setupPage{
		Title:          "Register gitlease as a GitHub App",
		PublicURL:      base,
		Derived:        derived,
		PlainHTTP:      strings.HasPrefix(base, "http://"),
		Action:         action,
		Manifest:       string(manifest),
		ManifestPretty: pretty.String(),
		Org:            org,
		Name:           name,
	})
}

// callback serves GET /setup/callback?code=…&state=…: it checks the state,
// exchanges the code for the new App's credentials and shows them once.
func (s *Server) callback(c echo.Context) error {
	code, state := c.QueryParam("code"), c.QueryParam("state")
	issued, ok := s.stateValid(state)
	if !ok {
		return s.fail(c, http.StatusBadRequest, "Unknown or expired setup state",
			"This callback does not belong to a registration started from this server's /setup page within the last hour, "+
				"or its credentials were already shown. Start again at /setup. If gitlease runs on several machines, the "+
				"callback may have reached another one than the page: run the setup with a single machine.")
	}
	if !sameBrowser(c, issued.browser) {
		// Someone else's registration handed to this browser: storing its
		// credentials would run gitlease as their App.
		s.logger.Warn("setup: callback refused: it comes from another browser than the one that started the setup")
		return s.fail(c, http.StatusForbidden, "This setup was started in another browser",
			"The registration this link completes was not started from this browser. If you did not start it, someone "+
				"may be trying to make this server use their App: do not use its credentials. Start again at /setup, "+
				"in this browser.")
	}
	if !manifestCode.MatchString(code) {
		return s.fail(c, http.StatusBadRequest, "Missing or malformed code",
			"GitHub redirects here with a code after you create the App. Start again at /setup.")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), exchangeTimeout)
	defer cancel()
	client := github.NewClient(s.cfg.HTTPClient)
	client.BaseURL = s.apiURL
	conf, err := exchange(ctx, client, code)
	if err != nil {
		var ghErr *github.ErrorResponse
		if errors.As(err, &ghErr) && ghErr.Response != nil &&
			(ghErr.Response.StatusCode == http.StatusNotFound || ghErr.Response.StatusCode == http.StatusUnprocessableEntity) {
			s.logger.Warn("setup: GitHub refused the manifest code", "status", ghErr.Response.StatusCode)
			return s.fail(c, http.StatusBadRequest, "GitHub does not accept this code",
				"The code has expired (codes last one hour), was already exchanged, or was issued by another GitHub "+
					"than the one GITHUB_API_URL names. If the App was created, its settings page on GitHub lets you "+
					"generate a new private key and set a webhook secret; otherwise start again at /setup.")
		}
		s.logger.Error("setup: exchange the manifest code", "err", err)
		return s.fail(c, http.StatusBadGateway, "GitHub did not complete the registration",
			"The exchange with GitHub failed; the server log says why. Reload this page to try again, "+
				"or start again at /setup.")
	}
	s.consumeState(state)
	if why := s.grants.mismatch(conf); why != "" {
		s.logger.Warn("setup: the created App does not match the manifest; its credentials are not shown", "app_id", conf.GetID(), "mismatch", why)
		return s.fail(c, http.StatusBadRequest, "The created App is not the one gitlease asked for",
			"GitHub created an App with other permissions or events than gitlease's manifest ("+why+"), so its "+
				"credentials are not shown. Delete that App on GitHub and start again at /setup.")
	}
	creds := appCredentials{
		ID:            conf.GetID(),
		Slug:          conf.GetSlug(),
		Name:          conf.GetName(),
		Owner:         conf.GetOwner().GetLogin(),
		HTMLURL:       conf.GetHTMLURL(),
		WebhookSecret: conf.GetWebhookSecret(),
		PEM:           conf.GetPEM(),
	}
	s.logger.Info("setup: GitHub App registered", "app_id", creds.ID, "slug", creds.Slug, "owner", creds.Owner)
	base, _, _ := s.baseURL(c)
	page := setupPage{
		Title:         "GitHub App " + creds.Name + " registered",
		App:           creds,
		HasWebhookKey: creds.WebhookSecret != "",
		SecretsCmd:    secretsCommand(creds),
	}
	if creds.HTMLURL != "" {
		page.InstallURL = strings.TrimRight(creds.HTMLURL, "/") + "/installations/new"
	}
	if base != "" {
		page.ReadyzURL = base + "/readyz"
	}
	return s.render(c, http.StatusOK, "done", page)
}

// secretsCommand is the fly command that stores the new App's credentials.
// The private key is read from the file the page asks the user to save.
func secretsCommand(a appCredentials) string {
	parts := []string{"fly secrets set",
		fmt.Sprintf("GITHUB_APP_ID=%d", a.ID),
		"GITHUB_APP_SLUG=" + shellQuote(a.Slug),
	}
	if a.WebhookSecret != "" {
		parts = append(parts, "GITHUB_WEBHOOK_SECRET="+shellQuote(a.WebhookSecret))
	}
	parts = append(parts, `GITHUB_PRIVATE_KEY="$(cat gitlease-private-key.pem)"`)
	return strings.Join(parts, " \\\n  ")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// baseURL is the public URL to put into the manifest: the configured one,
// else one derived from the request (derived is then true).
func (s *Server) baseURL(c echo.Context) (base string, derived bool, err error) {
	if s.publicURL != "" {
		return s.publicURL, false, nil
	}
	r := c.Request()
	host := r.Host
	if host == "" || strings.ContainsAny(host, "/?#@\\ \t") {
		return "", true, errors.New("no usable Host header")
	}
	scheme := c.Scheme()
	if p, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ","); p != "" {
		if p = strings.ToLower(strings.TrimSpace(p)); p == "http" || p == "https" {
			scheme = p
		}
	}
	base, err = ParsePublicURL(scheme + "://" + host)
	return base, true, err
}

// issueState returns a new random state and remembers it, bound to
// browser, forgetting expired states and, past maxSetupStates, the oldest.
func (s *Server) issueState(browser string) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("read random state: %w", err)
	}
	state := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for st, is := range s.states {
		if now.Sub(is.at) >= SetupStateTTL {
			delete(s.states, st)
		}
	}
	for len(s.states) >= maxSetupStates {
		oldest, oldestAt := "", now
		for st, is := range s.states {
			if oldest == "" || is.at.Before(oldestAt) {
				oldest, oldestAt = st, is.at
			}
		}
		delete(s.states, oldest)
	}
	s.states[state] = issuedState{at: now, browser: browser}
	return state, nil
}

// stateValid returns state's issue record if this Setup issued it within
// SetupStateTTL and it has not been consumed.
func (s *Server) stateValid(state string) (issuedState, bool) {
	if state == "" {
		return issuedState{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	is, ok := s.states[state]
	if ok && s.cfg.Now().Sub(is.at) >= SetupStateTTL {
		delete(s.states, state)
		return issuedState{}, false
	}
	return is, ok
}

// consumeState forgets state, so its credentials page is shown once.
func (s *Server) consumeState(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.states, state)
}

// fail renders an error page with status, a title and a message meant for
// the person at the browser; it never carries error internals.
func (s *Server) fail(c echo.Context, status int, title, message string) error {
	return s.render(c, status, "error", setupPage{Title: title, Message: message})
}

// render writes one of the flow's pages with headers that keep it out of
// caches, frames and Referer headers.
func (s *Server) render(c echo.Context, status int, page string, data setupPage) error {
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, page, data); err != nil {
		s.logger.Error("setup: render page", "page", page, "err", err)
		return c.String(http.StatusInternalServerError, "gitlease: the setup page failed to render; the server log says why")
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	return c.HTMLBlob(status, buf.Bytes())
}

// setupPages are the flow's HTML pages; html/template escapes every value.
