package setup_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/setup"
)

// TestSetupCallbackFromAnotherBrowser: an attacker starts a registration in
// their browser, creates their App and hands the operator the callback
// link. The operator's browser, with no setup cookie or with its own, is
// refused before GitHub is asked anything, and nothing is shown; the
// attacker's own browser could still complete it, which shows the refusal
// is the binding and not the state.
func TestSetupCallbackFromAnotherBrowser(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	srv := newSetupServer(t, setup.Config{APIURL: gh.URL(), PublicURL: "https://gl.example.com"})
	attacker := parseStart(t, srv.URL, nil, "")
	created := gh.AddManifestCodeFor("a77ac4e5", attacker.manifestRaw)
	operator := parseStart(t, srv.URL, nil, "")
	link := srv.URL + "/setup/callback?code=a77ac4e5&state=" + url.QueryEscape(attacker.state)
	for name, header := range map[string]map[string]string{
		"no cookie":                 nil,
		"the operator's own cookie": operator.with(nil),
		"a forged cookie":           {"Cookie": "gitlease_setup=" + strings.Repeat("A", 32)},
	} {
		p := get(t, link, header)
		if p.status != http.StatusForbidden || strings.Contains(p.body, created.WebhookSecret) || strings.Contains(p.body, "PRIVATE KEY") {
			t.Errorf("%s: callback = %d, want 403 without the credentials:\n%s", name, p.status, p.body)
		}
	}
	if n := gh.Count(githubtest.KindManifest); n != 0 {
		t.Errorf("GitHub was asked to convert %d times for a callback from another browser, want 0", n)
	}
	if p := get(t, link, attacker.with(nil)); p.status != http.StatusOK {
		t.Errorf("callback from the browser that started it = %d, want 200:\n%s", p.status, p.body)
	}
}

// TestSetupBrowserKeepsItsCookie: a browser that reloads /setup keeps its
// ID, so each of its open setup pages can complete.
func TestSetupBrowserKeepsItsCookie(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	srv := newSetupServer(t, setup.Config{APIURL: gh.URL(), PublicURL: "https://gl.example.com"})
	first := parseStart(t, srv.URL, nil, "")
	second := parseStart(t, srv.URL, first.with(nil), "")
	if first.cookie != second.cookie {
		t.Fatalf("reloading /setup changed the browser cookie: %q then %q", first.cookie, second.cookie)
	}
	gh.AddManifestCodeFor("f1r57", first.manifestRaw)
	if p := get(t, srv.URL+"/setup/callback?code=f1r57&state="+url.QueryEscape(first.state), second.with(nil)); p.status != http.StatusOK {
		t.Errorf("callback of the first page = %d, want 200:\n%s", p.status, p.body)
	}
}

// TestSetupRefusesAnAppUnlikeTheManifest: a code for an App with other
// permissions or events than gitlease's manifest (an attacker's App,
// created from their own manifest) is refused and its credentials are not
// shown.
func TestSetupRefusesAnAppUnlikeTheManifest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(m map[string]any)
	}{
		{"more permissions", func(m map[string]any) {
			m["default_permissions"].(map[string]any)["administration"] = "write"
		}},
		{"fewer permissions", func(m map[string]any) { delete(m["default_permissions"].(map[string]any), "checks") }},
		{"other events", func(m map[string]any) { m["default_events"] = []any{"issues", "push"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gh := githubtest.New(t)
			srv := newSetupServer(t, setup.Config{APIURL: gh.URL(), PublicURL: "https://gl.example.com"})
			sp := parseStart(t, srv.URL, nil, "")
			var m map[string]any
			if err := json.Unmarshal(sp.manifestRaw, &m); err != nil {
				t.Fatal(err)
			}
			tc.mutate(m)
			other, _ := json.Marshal(m)
			created := gh.AddManifestCodeFor("0the7", other)
			p := get(t, srv.URL+"/setup/callback?code=0the7&state="+url.QueryEscape(sp.state), sp.with(nil))
			if p.status != http.StatusBadRequest || strings.Contains(p.body, created.WebhookSecret) || strings.Contains(p.body, "PRIVATE KEY") {
				t.Errorf("callback = %d, want 400 without the credentials:\n%s", p.status, p.body)
			}
		})
	}
}
