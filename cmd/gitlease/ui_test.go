package main

import (
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

func TestSecretSetting(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, env, envFile, want, wantErr string
	}{
		{name: "unset"},
		{name: "env", env: "from-env-0123456789", want: "from-env-0123456789"},
		{name: "file", envFile: file, want: "from-a-file-0123456789"},
		{name: "both", env: "x", envFile: file, wantErr: "not both"},
		{name: "missing file", envFile: filepath.Join(dir, "nope"), wantErr: "GITLEASE_UI_TOKEN_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GITLEASE_UI_TOKEN", tt.env)
			t.Setenv("GITLEASE_UI_TOKEN_FILE", tt.envFile)
			got, err := secretSetting("GITLEASE_UI_TOKEN")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("= %q, %v; want %q", string(got), err, tt.want)
			}
		})
	}
}

func TestLoadUIConfig(t *testing.T) {
	tests := []struct{ admin, view, wantErr string }{
		{},
		{admin: "0123456789abcdef"},
		{admin: "0123456789abcdef", view: "fedcba9876543210"},
		{admin: "short", wantErr: "at least 16"},
		{view: "fedcba9876543210", wantErr: "needs GITLEASE_UI_TOKEN"},
		{admin: "0123456789abcdef", view: "0123456789abcdef", wantErr: "must differ"},
	}
	for _, tt := range tests {
		t.Setenv("GITLEASE_UI_TOKEN", tt.admin)
		t.Setenv("GITLEASE_UI_VIEW_TOKEN", tt.view)
		var c config
		err := loadUIConfig(&c)
		if tt.wantErr == "" && (err != nil || string(c.UIToken) != tt.admin || string(c.UIViewToken) != tt.view) {
			t.Errorf("%+v: %v, %+v", tt, err, c)
		}
		if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v: err = %v, want %q", tt, err, tt.wantErr)
		}
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
