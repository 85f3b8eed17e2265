package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestManifestCommand: `gitlease manifest --url URL` prints manifest.yml as
// JSON with URL filled in, and refuses a missing or bad URL with a
// configuration error.
func TestManifestCommand(t *testing.T) {
	t.Setenv("GITLEASE_PUBLIC_URL", "")
	var out, errs bytes.Buffer
	if err := runManifest([]string{"--url", "https://gitlease.example.com/"}, &out, &errs); err != nil {
		t.Fatalf("gitlease manifest: %v\n%s", err, errs.String())
	}
	var m struct {
		Name        string            `json:"name"`
		URL         string            `json:"url"`
		RedirectURL string            `json:"redirect_url"`
		Public      *bool             `json:"public"`
		Hooks       map[string]any    `json:"hook_attributes"`
		Permissions map[string]string `json:"default_permissions"`
		Events      []string          `json:"default_events"`
	}
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("gitlease manifest printed no JSON: %v\n%s", err, out.String())
	}
	if m.Name != "gitlease" || m.URL != "https://gitlease.example.com" ||
		m.RedirectURL != "https://gitlease.example.com/setup/callback" ||
		m.Hooks["url"] != "https://gitlease.example.com/webhook" || m.Public == nil || *m.Public {
		t.Errorf("gitlease manifest = %s", out.String())
	}
	wantPerms := map[string]string{"checks": "write", "contents": "write", "pull_requests": "write", "issues": "read", "metadata": "read"}
	if len(m.Permissions) != len(wantPerms) {
		t.Errorf("default_permissions = %v, want %v", m.Permissions, wantPerms)
	}
	for k, v := range wantPerms {
		if m.Permissions[k] != v {
			t.Errorf("default_permissions = %v, want %v", m.Permissions, wantPerms)
		}
	}
	if strings.Join(m.Events, ",") != "issues,issue_comment,pull_request,installation" {
		t.Errorf("default_events = %v", m.Events)
	}

	for _, args := range [][]string{nil, {"--url", "gitlease.example.com"}, {"--url", "https://x", "extra"}} {
		out.Reset()
		err := runManifest(args, &out, &errs)
		var cfgErr *configError
		if !errors.As(err, &cfgErr) || out.Len() != 0 {
			t.Errorf("gitlease manifest %q = %v, printing %q; want a configuration error and no output", args, err, out.String())
		}
	}

	t.Setenv("GITLEASE_PUBLIC_URL", "https://from-env.example.com")
	out.Reset()
	if err := runManifest(nil, &out, &errs); err != nil || !strings.Contains(out.String(), `"https://from-env.example.com/webhook"`) {
		t.Errorf("gitlease manifest with GITLEASE_PUBLIC_URL = %v:\n%s", err, out.String())
	}
}
