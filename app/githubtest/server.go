package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gitlease/gitlease/app/githubtest/openapi"
)

// Kind names one endpoint of the fake. Fault injection and Count take a
// Kind; every recorded Request carries one.
type Kind string

// The endpoints the fake serves, by kind.
const (
	KindGetApp              Kind = "get_app"             // GET /app
	KindAccessToken         Kind = "access_token"        // POST /app/installations/{installation_id}/access_tokens
	KindManifest            Kind = "manifest_conversion" // POST /app-manifests/{code}/conversions
	KindGetRepo             Kind = "get_repo"            // GET /repos/{owner}/{repo}
	KindGetRef              Kind = "get_ref"             // GET /repos/{owner}/{repo}/git/ref/{ref} (and the legacy git/refs/{ref})
	KindCreateRef           Kind = "create_ref"          // POST /repos/{owner}/{repo}/git/refs
	KindUpdateRef           Kind = "update_ref"          // PATCH /repos/{owner}/{repo}/git/refs/{ref}
	KindGetCommit           Kind = "get_commit"          // GET /repos/{owner}/{repo}/git/commits/{commit_sha}
	KindCreateCommit        Kind = "create_commit"       // POST /repos/{owner}/{repo}/git/commits
	KindGetTree             Kind = "get_tree"            // GET /repos/{owner}/{repo}/git/trees/{tree_sha}
	KindListPulls           Kind = "list_pulls"          // GET /repos/{owner}/{repo}/pulls
	KindCreatePull          Kind = "create_pull"         // POST /repos/{owner}/{repo}/pulls
	KindGetPull             Kind = "get_pull"            // GET /repos/{owner}/{repo}/pulls/{pull_number}
	KindCreateCheckRun      Kind = "create_check_run"    // POST /repos/{owner}/{repo}/check-runs
	KindGetCheckRun         Kind = "get_check_run"       // GET /repos/{owner}/{repo}/check-runs/{check_run_id}
	KindUpdateCheckRun      Kind = "update_check_run"    // PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}
	KindListAnnotations     Kind = "list_annotations"    // GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations
	KindListCheckRunsForRef Kind = "list_check_runs"     // GET /repos/{owner}/{repo}/commits/{ref}/check-runs
	// KindUnknown is the kind of a request no route matches (answered 404).
	KindUnknown Kind = "unknown"
	// AnyKind, given to fault injection, matches requests of every kind.
	AnyKind Kind = "*"
)

// Kinds returns every endpoint kind the fake serves (not KindUnknown or
// AnyKind), in a stable order.
func Kinds() []Kind {
	return []Kind{KindGetApp, KindAccessToken, KindManifest, KindGetRepo, KindGetRef, KindCreateRef,
		KindUpdateRef, KindGetCommit, KindCreateCommit, KindGetTree, KindListPulls, KindCreatePull,
		KindGetPull, KindCreateCheckRun, KindGetCheckRun, KindUpdateCheckRun, KindListAnnotations,
		KindListCheckRunsForRef, KindListHookDeliveries, KindRedeliverHook, KindRevokeToken}
}

// Default identity of the fake's GitHub App.
const (
	DefaultAppID = 424242
	DefaultSlug  = "gitlease-test"
)

const docsREST = "https://docs.github.com/rest"

// Option configures a Server.
type Option func(*config)

type config struct {
	appID            int64
	slug             string
	lenient          bool
	forbidRefUpdates bool
	tokenTTL         time.Duration
	rateLimit        int
	rateWindow       time.Duration
	htmlURL          string
	htmlSet          bool
	prefix           string // the API's path prefix ("" or "/api/v3")
	latency          time.Duration
	keyBits          int
	autoCreate       bool
	autoBranch       func(branch string) bool // nil: no branch but the default one
}

// WithApp sets the App's ID and slug (defaults DefaultAppID, DefaultSlug).
func WithApp(id int64, slug string) Option {
	return func(c *config) { c.appID, c.slug = id, slug }
}

// Lenient records violations (see Violations) without failing the test.
// Use it in tests that send requests GitHub rejects on purpose.
func Lenient() Option { return func(c *config) { c.lenient = true } }

// ForbidRefUpdates makes every PATCH of a ref a violation, for code that
// must never move an existing ref. Without it updates are served as GitHub
// serves them (fast-forward unless force) and only counted.
func ForbidRefUpdates() Option { return func(c *config) { c.forbidRefUpdates = true } }

// WithRateLimit sets the primary rate limit of each identity (installation,
// App JWT, anonymous) per window (GitHub: 5000 per hour for an installation).
// A request beyond it is answered 403 with x-ratelimit-remaining: 0 until
// the window resets, as GitHub does.
func WithRateLimit(limit int, window time.Duration) Option {
	return func(c *config) { c.rateLimit, c.rateWindow = limit, window }
}

// WithHTMLURL sets the web base used in html_url fields (default
// "https://github.com").
func WithHTMLURL(base string) Option {
	return func(c *config) { c.htmlURL, c.htmlSet = strings.TrimRight(base, "/"), true }
}

// EnterprisePrefix is the path GitHub Enterprise Server serves its REST
// API under.
const EnterprisePrefix = "/api/v3"

// Enterprise makes the fake stand in for GitHub Enterprise Server: the API
// is served under EnterprisePrefix (URL ends in /api/v3/) and html_url
// fields point at the server's own root (WebURL), as on GHES. A request
// outside the prefix is an unknown route (404 and a violation), so a client
// that drops the prefix is caught; only a check run's web page
// (CheckRunPage) is served there. Recorded Request paths are the part
// after the prefix, as on github.com, so one test reads both.
func Enterprise() Option { return func(c *config) { c.prefix = EnterprisePrefix } }

// WithLatency delays every response by d, to widen race windows between
// concurrent clients.
func WithLatency(d time.Duration) Option { return func(c *config) { c.latency = d } }

// AutoDefaultBranch is the default branch of a repository WithAutoCreate
// creates.
const AutoDefaultBranch = "main"

// WithAutoCreate makes the fake stand in for a GitHub on which the App is
// installed everywhere, so a client can run against it with no set-up
// (gitlease dev's dry run): a token is issued for any installation ID (the
// installation is created, on every repository, with the default
// permissions), and a repository a request names is created on first use
// with default branch AutoDefaultBranch holding one initial commit.
//
// A branch a request reads (GET git/ref/heads/x) or names as a pull
// request's base that the repository lacks is created on the default
// branch's head when isBase(branch) reports true: those are the branches
// that exist on a real repository before the client comes (its base
// branches), unlike those the client creates itself, which must stay absent
// until it does. A nil isBase creates no branch but the default one.
// Everything else stays strict.
func WithAutoCreate(isBase func(branch string) bool) Option {
	return func(c *config) { c.autoCreate, c.autoBranch = true, isBase }
}

// Server is a fake GitHub. New starts one on a loopback listener for a
// test; NewHandler makes one that serves only through ServeHTTP and
// Transport. Server is an http.Handler serving the API at its root.
type Server struct {
	// AppID is the ID of the fake's GitHub App, the JWT issuer it accepts.
	AppID int64
	// Slug is the App's slug; its bot user is "<Slug>[bot]".
	Slug string
	// ClientID is the App's client ID, also accepted as JWT issuer.
	ClientID string
	// PrivateKeyPEM is the App's private key (PKCS#1 PEM, as GitHub issues
	// it), for ghinstallation.NewAppsTransport.
	PrivateKeyPEM []byte
	// PrivateKey is the parsed PrivateKeyPEM.
	PrivateKey *rsa.PrivateKey

	tb    Reporter
	cfg   config
	srv   *httptest.Server // nil for NewHandler's
	root  string           // scheme and host, no trailing slash
	base  string           // the API base URL (root and prefix) without a trailing slash
	mux   *http.ServeMux
	ops   map[string]*openapi.Operation
	start time.Time

	mu            sync.Mutex
	apps          map[int64]*app
	installations map[int64]*installation
	tokens        map[string]*token
	tokenList     []*token         // issue order
	repos         map[string]*repo // by lower-case full name
	owners        map[string]int64 // lower-case login -> account ID
	checkRuns     map[int64]*checkRun
	manifestCodes map[string]*manifestCode
	nextID        int64
	requests      []Request
	counts        map[Kind]int
	violations    []Violation
	faults        faults
	rate          map[string]*rateBucket
	scopes        rateScopes // ratescope.go
	reqSeq        int64
	hooks         hookLog // the App webhook and its delivery log (hooks.go)
}

// Reporter receives the fake's violations (Errorf) and the misuse of its
// set-up methods (Fatalf), the way testing.TB does; testing.TB satisfies
// it. Outside tests, LogReporter logs them instead.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// TB is the part of testing.TB that New uses: a Reporter that also runs
// clean-ups. It is an interface, not testing.TB itself, so that a binary
// linking this package (gitlease dev) does not link package testing.
type TB interface {
	Reporter
	Cleanup(func())
}

// HandlerURL is the API base URL of a server made by NewHandler: the URLs
// in its answers (pagination links, url fields) start with it. The
// .invalid top-level domain never resolves (RFC 2606), so a request that
// bypasses Transport fails instead of reaching anyone.
const HandlerURL = "https://api.github.invalid/"

// New starts a fake GitHub on a loopback listener and registers its
// shutdown with tb.Cleanup. It generates the App's RSA key; add
// repositories with AddRepo and installations with AddInstallation before
// pointing a client at URL.
func New(tb TB, opts ...Option) *Server {
	tb.Helper()
	s, err := newServer(tb, opts)
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	// The listener exists before the server starts, so base is set before
	// any request can arrive.
	s.srv = httptest.NewUnstartedServer(s)
	s.root = "http://" + s.srv.Listener.Addr().String()
	s.base = s.root + s.cfg.prefix
	if s.cfg.prefix != "" && !s.cfg.htmlSet {
		s.cfg.htmlURL = s.root
	}
	s.srv.Start()
	tb.Cleanup(s.srv.Close)
	return s
}

// NewHandler returns a fake GitHub that listens nowhere: it answers
// through ServeHTTP and Transport, at HandlerURL. Violations go to r
// instead of failing a test. It returns an error when the App's key cannot
// be generated.
func NewHandler(r Reporter, opts ...Option) (*Server, error) {
	s, err := newServer(r, opts)
	if err != nil {
		return nil, err
	}
	s.root = strings.TrimSuffix(HandlerURL, "/")
	s.base = s.root + s.cfg.prefix
	return s, nil
}

// newServer builds the fake's state and routes, serving nothing yet.
func newServer(r Reporter, opts []Option) (*Server, error) {
	cfg := config{
		appID: DefaultAppID, slug: DefaultSlug, tokenTTL: time.Hour,
		rateLimit: 5000, rateWindow: time.Hour, htmlURL: "https://github.com", keyBits: 2048,
	}
	for _, o := range opts {
		o(&cfg)
	}
	ops, err := openapi.Load()
	if err != nil {
		return nil, fmt.Errorf("githubtest: %w", err)
	}
	s := &Server{
		AppID: cfg.appID, Slug: cfg.slug,
		tb: r, cfg: cfg, ops: ops, start: time.Now(),
		apps: map[int64]*app{}, installations: map[int64]*installation{}, tokens: map[string]*token{},
		repos: map[string]*repo{}, owners: map[string]int64{}, checkRuns: map[int64]*checkRun{},
		manifestCodes: map[string]*manifestCode{}, counts: map[Kind]int{}, rate: map[string]*rateBucket{},
		nextID: 1000,
	}
	a, err := s.newApp(cfg.appID, cfg.slug, "gitlease (test)", "octo-org", defaultPermissions(), defaultEvents())
	if err != nil {
		return nil, fmt.Errorf("githubtest: generate the App key: %w", err)
	}
	s.apps[a.id] = a
	s.ClientID, s.PrivateKeyPEM, s.PrivateKey = a.clientID, a.pem, a.key
	s.faults.init()
	s.mux = http.NewServeMux()
	for _, rt := range s.routes() {
		if _, ok := s.ops[rt.op]; !ok {
			return nil, fmt.Errorf("githubtest: route %s has no operation %q in openapi/requests.json", rt.pattern, rt.op)
		}
		s.mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			if rt.match != nil && !rt.match(r) {
				s.serve(w, r, nil)
				return
			}
			s.serve(w, r, rt)
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, nil) })
	return s, nil
}

// ServeHTTP answers one API request as GitHub would, from s's state.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.prefix == "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, s.cfg.prefix)
	if !ok || !strings.HasPrefix(rest, "/") {
		// The web root: a check run's page (web.go), else an unknown route.
		if !s.serveWeb(w, r) {
			s.serve(w, r, nil)
		}
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = rest, strings.TrimPrefix(r.URL.RawPath, s.cfg.prefix)
	s.mux.ServeHTTP(w, r2)
}

// URL returns the API base URL with a trailing slash, for go-github's
// BaseURL and GITHUB_API_URL. (ghinstallation's Transport.BaseURL wants it
// without the slash: see BaseURL.)
func (s *Server) URL() string { return s.base + "/" }

// WebURL returns the web base URL with a trailing slash, for GITHUB_URL:
// https://github.com/ (or WithHTMLURL's), or with Enterprise the server's
// own root.
func (s *Server) WebURL() string { return s.cfg.htmlURL + "/" }

// BaseURL returns the API base URL without a trailing slash, the form
// ghinstallation's Transport.BaseURL and AppsTransport.BaseURL expect.
func (s *Server) BaseURL() string { return s.base }

// Close shuts the listener down early (it is closed at cleanup anyway), to
// simulate GitHub being unreachable. It does nothing for NewHandler's.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.Close()
	}
}

func (s *Server) newApp(id int64, slug, name, owner string, perms map[string]string, events []string) (*app, error) {
	key, err := rsa.GenerateKey(rand.Reader, s.cfg.keyBits)
	if err != nil {
		return nil, err
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return &app{
		id: id, slug: slug, name: name, owner: owner, clientID: "Iv23li" + randomString(14),
		key: key, pem: pemBytes, permissions: perms, events: events, createdAt: time.Now().UTC(),
	}, nil
}

// ---- helpers ----

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (s *Server) apiURL(format string, args ...any) string {
	return s.base + "/" + strings.TrimPrefix(fmt.Sprintf(format, args...), "/")
}

func (s *Server) htmlURL(format string, args ...any) string {
	return s.cfg.htmlURL + "/" + strings.TrimPrefix(fmt.Sprintf(format, args...), "/")
}

func (s *Server) newID() int64 {
	s.nextID++
	return s.nextID
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

func nodeID(prefix string, id int64) string {
	return prefix + "_kgDO" + strconv.FormatInt(id, 36)
}

// str returns the string field k of a decoded body ("" when absent).
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// has reports whether the decoded body has field k (even null).
func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// intField returns the integer field k of a decoded body.
func intField(m map[string]any, k string) (int64, bool) {
	n, ok := m[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// page applies GitHub's per_page/page pagination to n items, returning the
// slice bounds and a Link header value ("" when everything fits).
func (c *call) page(n int) (lo, hi int, link string) {
	q := c.r.URL.Query()
	per := 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		per = min(v, 100)
	}
	pg := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		pg = v
	}
	lo = min((pg-1)*per, n)
	hi = min(lo+per, n)
	last := max(1, (n+per-1)/per)
	var links []string
	mk := func(p int, rel string) {
		q2 := c.r.URL.Query()
		q2.Set("page", strconv.Itoa(p))
		q2.Set("per_page", strconv.Itoa(per))
		links = append(links, fmt.Sprintf("<%s%s?%s>; rel=%q", c.s.base, c.r.URL.Path, q2.Encode(), rel))
	}
	if pg < last {
		mk(pg+1, "next")
		mk(last, "last")
	}
	if pg > 1 {
		mk(1, "first")
		mk(pg-1, "prev")
	}
	return lo, hi, strings.Join(links, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
