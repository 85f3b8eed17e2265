package setup_test

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/setup"
)

// clock is a settable time for state expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newSetupServer serves the manifest flow of cfg against GitHub at apiURL.
func newSetupServer(t *testing.T, cfg setup.Config) *httptest.Server {
	t.Helper()
	if cfg.ManifestYAML == nil {
		cfg.ManifestYAML = gitlease.ManifestYAML
	}
	s, err := setup.New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := echo.New()
	s.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

// page is one answer of the flow.
type page struct {
	status int
	header http.Header
	raw    string // as sent
	body   string // HTML-unescaped, for searching text
}

func get(t *testing.T, rawURL string, header map[string]string) page {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, raw: string(b), body: html.UnescapeString(string(b))}
}

var (
	formAction    = regexp.MustCompile(`<form id="register" action="([^"]*)" method="post">`)
	manifestInput = regexp.MustCompile(`<input type="hidden" name="manifest" value="([^"]*)">`)
)

// startPage is what GET /setup offers: where the form posts, the state in
// that address, and the manifest it posts.
type startPage struct {
	action      string
	state       string
	manifest    map[string]any
	manifestRaw []byte // as posted, for githubtest.AddManifestCodeFor
	cookie      string // the browser cookie /setup set, "name=value"
}

// with returns header plus the cookie of the browser that got the page,
// as that browser sends it to the callback.
func (sp startPage) with(header map[string]string) map[string]string {
	h := map[string]string{"Cookie": sp.cookie}
	for k, v := range header {
		h[k] = v
	}
	return h
}

// parseStart gets /setup+query and reads its registration form.
func parseStart(t *testing.T, srvURL string, header map[string]string, query string) startPage {
	t.Helper()
	p := get(t, srvURL+"/setup"+query, header)
	if p.status != http.StatusOK {
		t.Fatalf("GET /setup%s = %d:\n%s", query, p.status, p.body)
	}
	if cc := p.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("GET /setup Cache-Control = %q, want no-store", cc)
	}
	a := formAction.FindStringSubmatch(p.raw)
	m := manifestInput.FindStringSubmatch(p.raw)
	if a == nil || m == nil {
		t.Fatalf("GET /setup has no registration form with a manifest field:\n%s", p.raw)
	}
	sp := startPage{action: html.UnescapeString(a[1])}
	u, err := url.Parse(sp.action)
	if err != nil {
		t.Fatalf("form action %q: %v", sp.action, err)
	}
	sp.state = u.Query().Get("state")
	if len(sp.state) < 20 {
		t.Fatalf("form action %q carries no random state", sp.action)
	}
	sp.manifestRaw = []byte(html.UnescapeString(m[1]))
	cookies := (&http.Response{Header: p.header}).Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteLaxMode || cookies[0].Path != "/setup" {
		t.Fatalf("GET /setup set cookies %+v, want one HttpOnly, SameSite=Lax cookie for /setup", cookies)
	}
	sp.cookie = cookies[0].Name + "=" + cookies[0].Value
	if err := json.Unmarshal(sp.manifestRaw, &sp.manifest); err != nil {
		t.Fatalf("the manifest field is not JSON: %v\n%s", err, m[1])
	}
	return sp
}

func checkManifestURLs(t *testing.T, manifest map[string]any, base string) {
	t.Helper()
	hooks, _ := manifest["hook_attributes"].(map[string]any)
	got := map[string]any{"url": manifest["url"], "redirect_url": manifest["redirect_url"]}
	if hooks != nil {
		got["hook_attributes.url"] = hooks["url"]
	}
	want := map[string]any{"url": base, "redirect_url": base + "/setup/callback", "hook_attributes.url": base + "/webhook"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("manifest %s = %v, want %v", k, got[k], v)
		}
	}
	if manifest["public"] != false || manifest["name"] != "gitlease" {
		t.Errorf("manifest name %v, public %v; want gitlease, false", manifest["name"], manifest["public"])
	}
	perms, _ := json.Marshal(manifest["default_permissions"])
	if string(perms) != `{"checks":"write","contents":"write","issues":"read","metadata":"read","pull_requests":"write"}` {
		t.Errorf("manifest default_permissions = %s", perms)
	}
	events, _ := json.Marshal(manifest["default_events"])
	if string(events) != `["issues","issue_comment","pull_request","installation"]` {
		t.Errorf("manifest default_events = %s", events)
	}
}

// TestSetupManifestFlow walks GitHub's manifest flow against the fake
// GitHub: the page posts the manifest with this server's URLs to GitHub with
// a state; the callback exchanges the code once and shows the credentials
// once; a second use of the code fails cleanly; a state this server did not
// issue is a 400.
//
// It runs once against github.com and once against GitHub Enterprise
// Server (the API under /api/v3/, the form on the server's web root).
func TestSetupManifestFlow(t *testing.T) {
	t.Parallel()
	for _, base := range []struct {
		name string
		opts []githubtest.Option
	}{{"github.com", nil}, {"enterprise-server", []githubtest.Option{githubtest.Enterprise()}}} {
		t.Run(base.name, func(t *testing.T) {
			t.Parallel()
			testSetupManifestFlow(t, githubtest.New(t, base.opts...))
		})
	}
}

func testSetupManifestFlow(t *testing.T, gh *githubtest.Server) {
	srv := newSetupServer(t, setup.Config{APIURL: gh.URL(), WebURL: gh.WebURL()})
	proxied := map[string]string{"Host": "gitlease.example.com", "X-Forwarded-Proto": "https"}

	sp := parseStart(t, srv.URL, proxied, "")
	checkManifestURLs(t, sp.manifest, "https://gitlease.example.com")
	if want := gh.WebURL() + "settings/apps/new?state="; !strings.HasPrefix(sp.action, want) {
		t.Errorf("the form posts to %q, want %s<state>", sp.action, want)
	}
	// The user creates the App on GitHub from exactly what the form posts
	// (the fake checks the manifest as GitHub does).
	created := gh.AddManifestCodeFor("c0ffee01", sp.manifestRaw)

	// An unknown state is refused before GitHub is asked anything.
	for _, q := range []string{"?code=c0ffee01&state=forged", "?code=c0ffee01", "?code=c0ffee01&state="} {
		if p := get(t, srv.URL+"/setup/callback"+q, nil); p.status != http.StatusBadRequest || !strings.Contains(p.body, "Unknown or expired setup state") {
			t.Errorf("callback%s = %d, want 400 for an unknown state:\n%s", q, p.status, p.body)
		}
	}
	if n := gh.Count(githubtest.KindManifest); n != 0 {
		t.Errorf("GitHub was asked %d times for callbacks with a bad state, want 0", n)
	}

	// The real callback shows the App's credentials, uncached.
	p := get(t, srv.URL+"/setup/callback?code=c0ffee01&state="+url.QueryEscape(sp.state), sp.with(proxied))
	if p.status != http.StatusOK {
		t.Fatalf("callback = %d, want 200:\n%s", p.status, p.body)
	}
	if created.WebhookSecret == "" || len(created.PEM) == 0 {
		t.Fatalf("the fake created an App without webhook secret or key: %+v", created)
	}
	for _, want := range []string{
		fmt.Sprintf(`<dd id="app-id">%d</dd>`, created.ID), `<dd id="app-slug">` + created.Slug + `</dd>`,
		created.WebhookSecret, strings.TrimSpace(string(created.PEM)),
		fmt.Sprintf("GITHUB_APP_ID=%d", created.ID), "fly secrets set", created.HTMLURL + "/installations/new",
		"https://gitlease.example.com/readyz",
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the credentials page lacks %q:\n%s", want, p.body)
		}
	}
	if strings.Contains(p.body, created.ClientSecret) {
		t.Error("the credentials page shows the OAuth client secret, which gitlease does not use")
	}
	if cc := p.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("credentials page Cache-Control = %q, want no-store", cc)
	}
	if rp := p.header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Errorf("credentials page Referrer-Policy = %q, want no-referrer", rp)
	}

	// Reloading the page does not show the credentials again.
	p = get(t, srv.URL+"/setup/callback?code=c0ffee01&state="+url.QueryEscape(sp.state), sp.with(nil))
	if p.status != http.StatusBadRequest || strings.Contains(p.body, "PRIVATE KEY") {
		t.Errorf("second callback with the same state = %d, want 400 without the key:\n%s", p.status, p.body)
	}

	// The same code under a fresh state: GitHub refuses it; the page says so
	// without GitHub's error internals.
	sp2 := parseStart(t, srv.URL, nil, "")
	p = get(t, srv.URL+"/setup/callback?code=c0ffee01&state="+url.QueryEscape(sp2.state), sp2.with(nil))
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "GitHub does not accept this code") {
		t.Errorf("second use of the code = %d, want 400 saying GitHub refused it:\n%s", p.status, p.body)
	}
	for _, leak := range []string{"app-manifests", "Not Found", "404", strings.TrimSuffix(gh.URL(), "/"), "PRIVATE KEY"} {
		if strings.Contains(p.body, leak) {
			t.Errorf("the error page leaks %q:\n%s", leak, p.body)
		}
	}
	if n := gh.Count(githubtest.KindManifest); n != 2 {
		t.Errorf("GitHub was asked to convert %d times, want 2", n)
	}

	// A malformed code never reaches GitHub.
	if p := get(t, srv.URL+"/setup/callback?code=../../app&state="+url.QueryEscape(sp2.state), sp2.with(nil)); p.status != http.StatusBadRequest {
		t.Errorf("callback with a malformed code = %d, want 400", p.status)
	}
	if n := gh.Count(githubtest.KindManifest); n != 2 {
		t.Error("a malformed code was sent to GitHub")
	}
}

// TestSetupGitHubDown: an exchange GitHub cannot complete is a clean 502
// page that does not consume the state, so a reload can try again.
func TestSetupGitHubDown(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	srv := newSetupServer(t, setup.Config{APIURL: gh.URL(), PublicURL: "https://gl.example.com"})
	sp := parseStart(t, srv.URL, nil, "")
	created := gh.AddManifestCodeFor("abc123", sp.manifestRaw)
	gh.FailNext(githubtest.KindManifest, 2, http.StatusInternalServerError)
	for range 2 {
		p := get(t, srv.URL+"/setup/callback?code=abc123&state="+url.QueryEscape(sp.state), sp.with(nil))
		if p.status != http.StatusBadGateway || strings.Contains(p.body, strings.TrimSuffix(gh.URL(), "/")) || strings.Contains(p.body, "500") {
			t.Fatalf("callback with GitHub failing = %d, want a clean 502:\n%s", p.status, p.body)
		}
	}
	p := get(t, srv.URL+"/setup/callback?code=abc123&state="+url.QueryEscape(sp.state), sp.with(nil))
	if p.status != http.StatusOK || !strings.Contains(p.body, created.WebhookSecret) {
		t.Fatalf("callback once GitHub is back = %d, want 200 with the credentials:\n%s", p.status, p.body)
	}
}

// TestSetupStateExpires: a state is good for an hour.
func TestSetupStateExpires(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	clk := &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv := newSetupServer(t, setup.Config{APIURL: gh.URL(), PublicURL: "https://gl.example.com", Now: clk.Now})
	sp := parseStart(t, srv.URL, nil, "")
	gh.AddManifestCodeFor("late", sp.manifestRaw)
	clk.Add(setup.SetupStateTTL + time.Second)
	if p := get(t, srv.URL+"/setup/callback?code=late&state="+url.QueryEscape(sp.state), sp.with(nil)); p.status != http.StatusBadRequest {
		t.Fatalf("callback after the state expired = %d, want 400", p.status)
	}
	if gh.Count(githubtest.KindManifest) != 0 {
		t.Error("GitHub was asked to convert a code under an expired state")
	}
	sp = parseStart(t, srv.URL, nil, "")
	clk.Add(setup.SetupStateTTL - time.Minute)
	if p := get(t, srv.URL+"/setup/callback?code=late&state="+url.QueryEscape(sp.state), sp.with(nil)); p.status != http.StatusOK {
		t.Fatalf("callback within the hour = %d, want 200:\n%s", p.status, p.body)
	}
}

// TestSetupOptions: the configured public URL wins over the request, an
// organization changes where the form posts, and bad options are 400s.
func TestSetupOptions(t *testing.T) {
	t.Parallel()
	srv := newSetupServer(t, setup.Config{
		APIURL: "https://ghe.example.com/api/v3/", WebURL: "https://ghe.example.com/", PublicURL: "https://gl.example.com/prefix/",
	})
	sp := parseStart(t, srv.URL, map[string]string{"Host": "elsewhere.example.org"}, "")
	checkManifestURLs(t, sp.manifest, "https://gl.example.com/prefix")
	if want := "https://ghe.example.com/settings/apps/new?state="; !strings.HasPrefix(sp.action, want) {
		t.Errorf("on GHES the form posts to %q, want %s<state>", sp.action, want)
	}
	sp = parseStart(t, srv.URL, nil, "?org=octo-org")
	if want := "https://ghe.example.com/organizations/octo-org/settings/apps/new?state="; !strings.HasPrefix(sp.action, want) {
		t.Errorf("for an organization the form posts to %q, want %s<state>", sp.action, want)
	}
	for _, q := range []string{"?org=-bad", "?org=a/b", "?name=" + strings.Repeat("x", 35)} {
		if p := get(t, srv.URL+"/setup"+q, nil); p.status != http.StatusBadRequest {
			t.Errorf("GET /setup%s = %d, want 400", q, p.status)
		}
	}
}

// TestSetupWebURL: the form posts where GITHUB_URL says, github.com when
// unset, and a WebURL that is no http(s) URL is refused at start.
func TestSetupWebURL(t *testing.T) {
	t.Parallel()
	for web, want := range map[string]string{
		"":                          "https://github.com/settings/apps/new?state=",
		"https://ghe.example.com":   "https://ghe.example.com/settings/apps/new?state=",
		"https://ghe.example.com/":  "https://ghe.example.com/settings/apps/new?state=",
		"http://127.0.0.1:4567/gh/": "http://127.0.0.1:4567/gh/settings/apps/new?state=",
	} {
		srv := newSetupServer(t, setup.Config{WebURL: web, PublicURL: "https://gl.example.com"})
		if sp := parseStart(t, srv.URL, nil, ""); !strings.HasPrefix(sp.action, want) {
			t.Errorf("WebURL %q: the form posts to %q, want %s<state>", web, sp.action, want)
		}
	}
	for _, bad := range []string{"not a url", "ftp://ghe.example.com/", "https://ghe.example.com/?x=1"} {
		if _, err := setup.New(setup.Config{ManifestYAML: gitlease.ManifestYAML, WebURL: bad}, nil); err == nil {
			t.Errorf("WebURL %q accepted", bad)
		}
	}
}

func TestRenderManifest(t *testing.T) {
	t.Parallel()
	out, err := setup.RenderManifest(gitlease.ManifestYAML, "https://gl.example.com/")
	if err != nil {
		t.Fatalf("RenderManifest(manifest.yml): %v", err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(out, &manifest); err != nil {
		t.Fatal(err)
	}
	checkManifestURLs(t, manifest, "https://gl.example.com")
	if !strings.HasPrefix(string(out), `{"name":"gitlease","url":`) {
		t.Errorf("RenderManifest does not keep manifest.yml's key order: %.60s", out)
	}
	for _, bad := range []string{"", "gl.example.com", "ftp://gl.example.com", "https://user@gl.example.com", "https://gl.example.com/?x=1"} {
		if _, err := setup.RenderManifest(gitlease.ManifestYAML, bad); err == nil {
			t.Errorf("RenderManifest accepted the public URL %q", bad)
		}
	}
	for name, src := range map[string]string{
		"other placeholder": "name: x\nurl: ${URL}\nhook_attributes: {url: ${HOST}/webhook}\n",
		"no hook url":       "name: x\nurl: ${URL}\n",
		"not a mapping":     "- a\n- b\n",
		"not YAML":          "name: [\n",
	} {
		if _, err := setup.RenderManifest([]byte(src), "https://gl.example.com"); err == nil {
			t.Errorf("RenderManifest accepted a manifest with %s", name)
		}
	}
}

// TestSetupClosedOnceConfigured: with GITHUB_APP_ID set, every /setup
// path answers 404, whatever the method; without it, a POST (which the
// flow never reads) is refused too.
func TestSetupClosedOnceConfigured(t *testing.T) {
	closed := newSetupServer(t, setup.Config{AppConfigured: true})
	open := newSetupServer(t, setup.Config{})
	for _, path := range []string{"/setup", "/setup/callback?code=x&state=y", "/setup/anything"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, _ := http.NewRequest(method, closed.URL+path, strings.NewReader("a=b"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("configured: %s %s = %d, want 404", method, path, resp.StatusCode)
			}
		}
	}
	resp, err := http.Post(open.URL+"/setup", "application/x-www-form-urlencoded", strings.NewReader("a=b"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Errorf("POST /setup = %d, want a refusal", resp.StatusCode)
	}
}
