package setup

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v66/github"
	"github.com/labstack/echo/v4"
)

// The two checks that keep the manifest flow from storing someone else's
// App: the callback must come from the browser that started the flow, and
// the App GitHub created must be the one gitlease's manifest describes.

// browserCookie names the cookie binding a setup state to the browser that
// asked for it. HttpOnly (no script reads it) and SameSite=Lax: GitHub's
// redirect back to /setup/callback is a top-level GET, which Lax lets the
// cookie ride on, while a cross-site subrequest does not carry it.
const browserCookie = "gitlease_setup"

// browserID returns the request's browser ID from its cookie, or a new
// random one. It also reports whether the ID is new.
func browserID(c echo.Context) (string, bool, error) {
	if ck, err := c.Cookie(browserCookie); err == nil && len(ck.Value) == 32 {
		if _, err := base64.RawURLEncoding.DecodeString(ck.Value); err == nil {
			return ck.Value, false, nil
		}
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, fmt.Errorf("read random browser ID: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), true, nil
}

// setBrowserCookie sends the browser ID cookie, Secure when the public URL
// is https, for the setup routes only, for as long as a state lives.
func setBrowserCookie(c echo.Context, id, base string) {
	c.SetCookie(&http.Cookie{
		Name: browserCookie, Value: id, Path: "/setup", MaxAge: int(SetupStateTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: strings.HasPrefix(base, "https://"),
	})
}

// sameBrowser reports whether the callback's cookie names the browser the
// state was issued to, in constant time.
func sameBrowser(c echo.Context, issuedTo string) bool {
	ck, err := c.Cookie(browserCookie)
	return err == nil && issuedTo != "" && subtle.ConstantTimeCompare([]byte(ck.Value), []byte(issuedTo)) == 1
}

// createdApp is the conversion's answer: the credentials go-github decodes,
// plus the permissions and events it leaves out.
type createdApp struct {
	github.AppConfig
	Permissions map[string]string `json:"permissions"`
	Events      []string          `json:"events"`
}

// exchange converts a manifest code into the created App (POST
// /app-manifests/{code}/conversions).
func exchange(ctx context.Context, client *github.Client, code string) (*createdApp, error) {
	req, err := client.NewRequest(http.MethodPost, "app-manifests/"+code+"/conversions", nil)
	if err != nil {
		return nil, fmt.Errorf("build the manifest conversion request: %w", err)
	}
	var app createdApp
	if _, err := client.Do(ctx, req, &app); err != nil {
		return nil, err
	}
	return &app, nil
}

// manifestGrants are the permissions and events the manifest asks for:
// what an App created from it must have, no more and no less.
type manifestGrants struct {
	Permissions map[string]string `json:"default_permissions"`
	Events      []string          `json:"default_events"`
}

// grantsOf reads the grants of a rendered manifest. GitHub grants
// metadata: read to every App, asked for or not.
func grantsOf(manifest []byte) (manifestGrants, error) {
	var g manifestGrants
	if err := json.Unmarshal(manifest, &g); err != nil {
		return g, fmt.Errorf("read the manifest's permissions and events: %w", err)
	}
	if g.Permissions == nil {
		g.Permissions = map[string]string{}
	}
	if _, ok := g.Permissions["metadata"]; !ok {
		g.Permissions["metadata"] = "read"
	}
	slices.Sort(g.Events)
	return g, nil
}

// mismatch says how app differs from the manifest's grants, or "" when it
// has exactly the permissions and events asked for.
func (g manifestGrants) mismatch(app *createdApp) string {
	events := slices.Clone(app.Events)
	slices.Sort(events)
	switch {
	case !maps.Equal(g.Permissions, app.Permissions):
		return fmt.Sprintf("permissions %v, the manifest asks for %v", app.Permissions, g.Permissions)
	case !slices.Equal(g.Events, events):
		return fmt.Sprintf("events %v, the manifest asks for %v", events, g.Events)
	}
	return ""
}
