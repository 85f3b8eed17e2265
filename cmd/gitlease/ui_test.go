package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app"
)

// TestUISecretsFromEnvOrFile: the dashboard's tokens come from the
// environment or a _FILE, never both, and must be long enough and distinct.
func TestUISecretsFromEnvOrFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, admin, adminFile, view, want, wantErr string
	}{
		{name: "unset"},
		{name: "env", admin: "from-env-0123456789", want: "from-env-0123456789"},
		{name: "file", adminFile: file, want: "from-a-file-0123456789"},
		{name: "both", admin: "0123456789abcdef", adminFile: file, wantErr: "not both"},
		{name: "missing file", adminFile: filepath.Join(dir, "nope"), wantErr: "GITLEASE_UI_TOKEN_FILE"},
		{name: "view too", admin: "0123456789abcdef", view: "fedcba9876543210", want: "0123456789abcdef"},
		{name: "short", admin: "short", wantErr: "GITLEASE_UI_TOKEN: must be at least 16"},
		{name: "short view", admin: "0123456789abcdef", view: "short", wantErr: "GITLEASE_UI_VIEW_TOKEN: must be at least 16"},
		{name: "view alone", view: "fedcba9876543210", wantErr: "needs GITLEASE_UI_TOKEN"},
		{name: "same", admin: "0123456789abcdef", view: "0123456789abcdef", wantErr: "must differ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GITLEASE_UI_TOKEN", tt.admin)
			t.Setenv("GITLEASE_UI_TOKEN_FILE", tt.adminFile)
			t.Setenv("GITLEASE_UI_VIEW_TOKEN", tt.view)
			c, err := loadConfig("serve", nil, true, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(c.UIToken) != tt.want || string(c.UIViewToken) != tt.view {
				t.Fatalf("= %q, %q, %v; want %q", string(c.UIToken), string(c.UIViewToken), err, tt.want)
			}
		})
	}
}

// TestDevPGHome: as root, a state directory the postgres user cannot enter
// (inside a 0700 folder, as mktemp -d makes) moves the cluster to /var/tmp,
// the same place on every run; one it can enter keeps it.
func TestDevPGHome(t *testing.T) {
	if os.Geteuid() != 0 {
		if got, err := devPGHome("/anywhere/.gitlease"); err != nil || got != "/anywhere/.gitlease" {
			t.Errorf("not root: %q, %v", got, err)
		}
		return
	}
	closed, err := os.MkdirTemp("", "gitlease-closed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(closed) })
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(closed, "checkout", ".gitlease")
	home, err := devPGHome(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if !strings.HasPrefix(home, "/var/tmp/gitlease-") || !othersCanEnter(home) {
		t.Errorf("closed checkout: home %q", home)
	}
	if again, _ := devPGHome(state); again != home {
		t.Errorf("second run: %q, first %q", again, home)
	}
	if err := os.Chmod(closed, 0o755); err != nil {
		t.Fatal(err)
	}
	if open, _ := devPGHome(closed); open != closed {
		t.Errorf("open checkout: %q, want %q", open, closed)
	}
}

// TestRegisterDashboard: serve's /ui answers 404 without GITLEASE_UI_TOKEN
// and the sign-in page with it.
func TestRegisterDashboard(t *testing.T) {
	for _, tt := range []struct {
		token string
		code  int
	}{{"", http.StatusNotFound}, {"0123456789abcdef", http.StatusOK}} {
		e := echo.New()
		if err := registerDashboard(e, config{UIToken: app.Secret(tt.token)}, nil, nil, nil, nil, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/login", nil))
		if rec.Code != tt.code {
			t.Errorf("token %q: GET /ui/login = %d, want %d", tt.token, rec.Code, tt.code)
		}
	}
}
