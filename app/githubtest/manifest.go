package githubtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// ManifestApp is the GitHub App a manifest code converts into: what
// POST /app-manifests/{code}/conversions returns for it.
type ManifestApp struct {
	ID            int64
	Slug          string
	Name          string
	ClientID      string
	ClientSecret  string
	WebhookSecret string
	// PEM is the new App's private key; the fake accepts JWTs signed with it
	// on GET /app once the code has been converted.
	PEM     []byte
	HTMLURL string
}

type manifestCode struct {
	used        bool
	app         *app
	result      ManifestApp
	externalURL string
	description string
}

// manifestKeys are the parameters GitHub documents for an App manifest.
var manifestKeys = map[string]bool{
	"name": true, "url": true, "hook_attributes": true, "redirect_url": true, "callback_urls": true,
	"setup_url": true, "description": true, "public": true, "default_events": true,
	"default_permissions": true, "request_oauth_on_install": true, "setup_on_update": true,
}

// eventPermission is the permission an App needs to subscribe to a webhook
// event ("" when none is needed).
var eventPermission = map[string]string{
	"issues": "issues", "issue_comment": "issues", "pull_request": "pull_requests",
	"pull_request_review": "pull_requests", "pull_request_review_comment": "pull_requests",
	"check_run": "checks", "check_suite": "checks", "push": "contents", "create": "contents",
	"delete": "contents", "release": "contents", "installation": "", "installation_repositories": "",
	"meta": "", "repository": "metadata", "status": "statuses", "workflow_run": "actions",
}

// AddManifestCodeFor registers a one-time code for manifest (the JSON a
// setup page posts to GitHub). The manifest is checked the way GitHub checks
// it when the user submits it (url required, hook_attributes.url required
// when hook_attributes is given, permission levels, events needing a
// permission the manifest does not request, unknown keys), failing the test
// on a problem. The conversion answers with the manifest's name,
// permissions and events.
func (s *Server) AddManifestCodeFor(code string, manifest []byte) ManifestApp {
	s.tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(manifest, &m); err != nil {
		s.tb.Errorf("githubtest: manifest is not a JSON object: %v", err)
		m = map[string]any{}
	}
	for _, p := range checkManifest(m) {
		s.tb.Errorf("githubtest: GitHub would reject the App manifest: %s", p)
	}
	name, _ := m["name"].(string)
	if name == "" {
		name = "gitlease-" + code
	}
	perms := map[string]string{"metadata": "read"}
	if dp, ok := m["default_permissions"].(map[string]any); ok {
		for k, v := range dp {
			if lv, ok := v.(string); ok {
				perms[k] = lv
			}
		}
	}
	events := []string{}
	if de, ok := m["default_events"].([]any); ok {
		for _, e := range de {
			if es, ok := e.(string); ok {
				events = append(events, es)
			}
		}
	}
	sort.Strings(events)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.manifestCodes[code]; ok {
		s.tb.Fatalf("githubtest: manifest code %q already registered", code)
		return ManifestApp{}
	}
	a, err := s.newApp(s.newID(), slugify(name), name, "octo-org", perms, events)
	if err != nil {
		s.tb.Fatalf("githubtest: generate the App key: %v", err)
		return ManifestApp{}
	}
	mc := &manifestCode{app: a}
	mc.externalURL, _ = m["url"].(string)
	mc.description, _ = m["description"].(string)
	mc.result = ManifestApp{
		ID: a.id, Slug: a.slug, Name: a.name, ClientID: a.clientID,
		ClientSecret: randomString(40), PEM: a.pem, HTMLURL: s.htmlURL("apps/%s", a.slug),
	}
	if h, ok := m["hook_attributes"].(map[string]any); !ok || h["url"] != nil {
		mc.result.WebhookSecret = randomString(40)
	}
	s.manifestCodes[code] = mc
	return mc.result
}

// checkManifest returns the problems GitHub would report for an App manifest.
func checkManifest(m map[string]any) []string {
	var probs []string
	for _, k := range sortedKeys(m) {
		if !manifestKeys[k] {
			probs = append(probs, fmt.Sprintf("unknown manifest key %q", k))
		}
	}
	validURL := func(field string, v any) {
		s, ok := v.(string)
		u, err := url.Parse(s)
		if !ok || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			probs = append(probs, fmt.Sprintf("%s must be an http(s) URL, got %v", field, v))
		}
	}
	if _, ok := m["url"]; !ok {
		probs = append(probs, "url is required")
	} else {
		validURL("url", m["url"])
	}
	if name, ok := m["name"]; ok {
		if s, _ := name.(string); len(s) > 34 || strings.TrimSpace(s) == "" {
			probs = append(probs, fmt.Sprintf("name must be 1 to 34 characters, got %q", s))
		}
	}
	if h, ok := m["hook_attributes"]; ok {
		hm, ok := h.(map[string]any)
		if !ok {
			probs = append(probs, "hook_attributes must be an object")
		} else if _, ok := hm["url"]; !ok {
			probs = append(probs, "hook_attributes.url is required")
		} else {
			validURL("hook_attributes.url", hm["url"])
			if a, ok := hm["active"]; ok {
				if _, ok := a.(bool); !ok {
					probs = append(probs, "hook_attributes.active must be a boolean")
				}
			}
		}
	}
	for _, k := range []string{"redirect_url", "setup_url"} {
		if v, ok := m[k]; ok {
			validURL(k, v)
		}
	}
	if cb, ok := m["callback_urls"]; ok {
		list, ok := cb.([]any)
		if !ok || len(list) > 10 {
			probs = append(probs, "callback_urls must be an array of at most 10 URLs")
		}
		for _, u := range list {
			validURL("callback_urls[]", u)
		}
	}
	for _, k := range []string{"public", "request_oauth_on_install", "setup_on_update"} {
		if v, ok := m[k]; ok {
			if _, ok := v.(bool); !ok {
				probs = append(probs, k+" must be a boolean")
			}
		}
	}
	perms := map[string]string{}
	if dp, ok := m["default_permissions"]; ok {
		pm, ok := dp.(map[string]any)
		if !ok {
			probs = append(probs, "default_permissions must be an object")
		}
		for _, k := range sortedKeys(pm) {
			lv, _ := pm[k].(string)
			if lv != "read" && lv != "write" && lv != "admin" {
				probs = append(probs, fmt.Sprintf("default_permissions.%s must be read, write or admin, got %v", k, pm[k]))
			}
			perms[k] = lv
		}
	}
	if de, ok := m["default_events"]; ok {
		list, ok := de.([]any)
		if !ok {
			probs = append(probs, "default_events must be an array")
		}
		var unsupported []string
		for _, e := range list {
			es, _ := e.(string)
			need, known := eventPermission[es]
			if known && need != "" && need != "metadata" && perms[need] == "" {
				unsupported = append(unsupported, es)
			}
		}
		if len(unsupported) > 0 {
			probs = append(probs, "Default events unsupported: "+strings.Join(unsupported, ", ")+" (the manifest does not request the permission these events need)")
		}
	}
	return probs
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

func slugify(name string) string {
	return strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(name), "-"), "-")
}

// handleManifest serves POST /app-manifests/{code}/conversions (no
// authentication). An unknown or already used code is a 404, as on GitHub
// (codes work once), and not a violation.
func (s *Server) handleManifest(c *call) response {
	mc := s.manifestCodes[c.r.PathValue("code")]
	if mc == nil || mc.used {
		return c.notFound()
	}
	mc.used = true
	s.apps[mc.app.id] = mc.app
	body := s.appJSON(mc.app)
	if mc.externalURL != "" {
		body["external_url"] = mc.externalURL
	}
	body["description"] = mc.description
	body["client_id"] = mc.result.ClientID
	body["client_secret"] = mc.result.ClientSecret
	body["pem"] = string(mc.result.PEM)
	if mc.result.WebhookSecret != "" {
		body["webhook_secret"] = mc.result.WebhookSecret
	} else {
		body["webhook_secret"] = nil
	}
	return response{status: http.StatusCreated, body: body}
}
