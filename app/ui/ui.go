// Package ui is gitlease's operator dashboard under /ui: server-rendered
// pages (html/template, assets embedded, nothing loaded from elsewhere,
// usable without JavaScript) over the tables the rest of gitlease writes,
// and the few actions that fix things. It reads through the sqlc queries of
// db/queries/ui.sql and changes items only through queue.Store and GitHub
// writes only through outbox.Outbox. See docs/ui.md.
package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cookie is the session cookie's name.
const Cookie = "gitlease_ui"

// Reconciler is what the dashboard needs of the redelivery reconciler
// (app/github): its state for the overview, and a scan on demand.
type Reconciler interface {
	// ScanNow scans GitHub's delivery log for missed deliveries now.
	ScanNow(ctx context.Context) error
	// Status reports the last scan and what it found.
	Status(ctx context.Context) (ReconcileStatus, error)
}

// ReconcileStatus is the reconciler's state as the overview shows it.
type ReconcileStatus struct {
	LastScan      time.Time // zero before the first scan
	Missed        int64     // deliveries found missed, in all scans so far
	Redelivered   int64     // of those, redelivered
	Unrecoverable int64     // past GitHub's retention or refused
	LastError     string    // the last scan's error, if it failed
}

// Config configures the dashboard. Zero fields take defaults.
type Config struct {
	// AdminToken signs in with every action (GITLEASE_UI_TOKEN); empty
	// disables the dashboard: every /ui path answers 404.
	AdminToken string
	// ViewToken signs in read-only (GITLEASE_UI_VIEW_TOKEN); empty: no
	// read-only sign-in.
	ViewToken string
	// SessionTTL is how long a sign-in lasts; 12h.
	SessionTTL time.Duration
	// LoginFailures failed sign-ins from one client within LoginWindow
	// block its sign-ins (429) for LoginBlock; 5, a minute, a minute.
	LoginFailures int
	LoginWindow   time.Duration
	LoginBlock    time.Duration
	// CountsTTL is how long the overview's per-status item counts (one
	// index-only scan) are reused; 15s.
	CountsTTL time.Duration
	// PageSize is the rows per list page; 50.
	PageSize int
	// Refresh is how often the lists reload themselves (with JavaScript);
	// 5s.
	Refresh time.Duration
	// GitHubURL is GitHub's web base URL with a trailing slash (GITHUB_URL),
	// which links to check runs start with; https://github.com/ when empty.
	GitHubURL string
	// Reconciler, if set, backs the overview's missed-deliveries panel and
	// the scan action; nil: the page says it is not configured.
	Reconciler Reconciler
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// UI is the dashboard. Register adds its routes.
type UI struct {
	cfg    Config
	key    []byte
	pool   *pgxpool.Pool
	q      *dbq.Queries
	store  *queue.Store
	outbox *outbox.Outbox
	pages  map[string]*template.Template
	logger *slog.Logger

	mu     sync.Mutex // guards counts
	counts cachedCounts
}

// cachedCounts is the last answer of the all-status count, and when.
type cachedCounts struct {
	at   time.Time
	bySt map[string]int64
}

// pageNames are the templates, each rendered inside layout.html.
var pageNames = []string{"login", "overview", "items", "item", "deliveries", "outbox", "confirm", "error"}

// New returns the dashboard over pool, changing items through store and
// GitHub writes through outbox. It returns an error only if its embedded
// templates do not parse.
func New(pool *pgxpool.Pool, store *queue.Store, outbox *outbox.Outbox, cfg Config, logger *slog.Logger) (*UI, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.LoginFailures <= 0 {
		cfg.LoginFailures = 5
	}
	if cfg.LoginWindow <= 0 {
		cfg.LoginWindow = time.Minute
	}
	if cfg.LoginBlock <= 0 {
		cfg.LoginBlock = time.Minute
	}
	if cfg.CountsTTL <= 0 {
		cfg.CountsTTL = 15 * time.Second
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 50
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.GitHubURL == "" {
		cfg.GitHubURL = "https://github.com/"
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	u := &UI{cfg: cfg, key: sessionKey(cfg.AdminToken, cfg.ViewToken), pool: pool, q: dbq.New(), store: store, outbox: outbox,
		pages: map[string]*template.Template{}, logger: logger}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs(cfg.Now)).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse dashboard template %s: %w", name, err)
		}
		u.pages[name] = t
	}
	return u, nil
}

// Enabled reports whether the dashboard answers at all (an admin token is set).
func (u *UI) Enabled() bool { return u.cfg.AdminToken != "" }

// Register adds the /ui routes to e. When the dashboard is disabled every
// /ui path answers 404.
func (u *UI) Register(e *echo.Echo) {
	if !u.Enabled() {
		notFound := func(c echo.Context) error { return c.String(http.StatusNotFound, "404 page not found\n") }
		e.Any("/ui", notFound)
		e.Any("/ui/*", notFound)
		return
	}
	static, _ := fs.Sub(staticFS, "static")
	g := e.Group("/ui")
	// Middleware goes on each route: echo's group middleware would add
	// catch-all routes of its own.
	open := []echo.MiddlewareFunc{u.headers, u.boundedForm}
	in := []echo.MiddlewareFunc{u.headers, u.boundedForm, u.requireSession}
	act := []echo.MiddlewareFunc{u.headers, u.boundedForm, u.requireSession, u.requireCSRF, u.requireAdmin}
	g.GET("", func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, "/ui/") }, open...)
	g.GET("/static/*", echo.WrapHandler(http.StripPrefix("/ui/static/", http.FileServer(http.FS(static)))), open...)
	g.GET("/login", u.loginPage, open...)
	g.POST("/login", u.login, open...)
	g.Any("/*", func(c echo.Context) error { return u.fail(c, http.StatusNotFound, "There is no such dashboard page.") }, in...)

	g.POST("/logout", u.logout, append(in, u.requireCSRF)...)
	g.GET("/", u.overview, in...)
	g.GET("/items", u.items, in...)
	g.GET("/items/:id", u.item, in...)
	g.GET("/deliveries", u.deliveries, in...)
	g.GET("/outbox", u.outboxPage, in...)
	g.POST("/items/:id/:action", u.act, act...)
	g.POST("/outbox/:id/retry", u.retry, act...)
	g.POST("/scan", u.scan, act...)
}

// headers keeps every dashboard page to its own origin's assets and out of frames.
func (u *UI) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// sessionOf returns the request's session, if it has a valid one that
// was not signed out. An error means the sign-outs could not be read.
func (u *UI) sessionOf(c echo.Context) (session, bool, error) {
	ck, err := c.Cookie(Cookie)
	if err != nil {
		return session{}, false, nil
	}
	s, err := parseSession(u.key, ck.Value, u.cfg.Now())
	if err != nil {
		return session{}, false, nil
	}
	out, err := u.q.UISignedOut(c.Request().Context(), u.pool, s.Nonce)
	if err != nil {
		return session{}, false, fmt.Errorf("read the dashboard's sign-outs: %w", err)
	}
	return s, !out, nil
}

const ctxSession = "ui.session"

func (u *UI) requireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		s, ok, err := u.sessionOf(c)
		if err != nil {
			return u.failErr(c, "checking the session", err)
		}
		if !ok {
			if c.Request().Method != http.MethodGet {
				return u.fail(c, http.StatusForbidden, "Your session has ended: sign in again.")
			}
			return c.Redirect(http.StatusSeeOther, "/ui/login")
		}
		c.Set(ctxSession, s)
		return next(c)
	}
}

func sess(c echo.Context) session {
	s, _ := c.Get(ctxSession).(session)
	return s
}

func (u *UI) requireCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !sess(c).checkCSRF(u.key, c.FormValue("csrf")) {
			return u.fail(c, http.StatusForbidden, "The form's CSRF token is missing or wrong: reload the page and try again.")
		}
		return next(c)
	}
}

func (u *UI) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if sess(c).Kind != KindAdmin {
			return u.fail(c, http.StatusForbidden, "This session is read-only: sign in with the admin token (GITLEASE_UI_TOKEN) to act.")
		}
		return next(c)
	}
}

// page is what every template gets: the page's data and the layout's.
type page struct {
	Title   string
	Nav     string
	Session session
	CSRF    string
	Refresh int // milliseconds; 0: the page does not refresh itself
	Notice  string
	Data    any
}

// render writes a page with status code.
func (u *UI) render(c echo.Context, code int, name string, p page) error {
	s := sess(c)
	p.Session = s
	if s.Nonce != "" {
		p.CSRF = s.csrf(u.key)
	}
	if n := c.QueryParam("done"); n != "" {
		p.Notice = notices[n]
	}
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(code)
	if err := u.pages[name].Execute(c.Response(), p); err != nil {
		u.logger.ErrorContext(c.Request().Context(), "render dashboard page", "page", name, "err", err)
	}
	return nil
}

// notices are the messages an action's redirect may ask the next page to show.
var notices = map[string]string{
	queue.ActionHold: "The item is held.", queue.ActionRelease: "The item is pending again.",
	queue.ActionDrop: "The item is dropped.", queue.ActionReclaim: "The expired lease is given back: the item is pending.",
	queue.ActionCancel: "The item is cancelled (an assigned one once its worker has stopped).",
	"retry":            "The GitHub write is pending again.", "scan": "The scan for missed deliveries ran.",
}

// fail renders the error page.
func (u *UI) fail(c echo.Context, code int, msg string) error {
	return u.render(c, code, "error", page{Title: http.StatusText(code), Data: msg})
}

// failErr renders an unexpected error as 500 without its internals.
func (u *UI) failErr(c echo.Context, what string, err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	u.logger.ErrorContext(c.Request().Context(), "dashboard: "+what, "err", err)
	return u.fail(c, http.StatusInternalServerError, "Something went wrong while "+what+"; the server log has the details.")
}
