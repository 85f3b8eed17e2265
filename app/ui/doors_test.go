package ui

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestLoginThrottle: the fifth failed sign-in from one client within a
// minute is answered 401 and blocks the client: the sixth attempt, even
// with the right token, is answered 429 with Retry-After; another client
// is not blocked; a minute later the client may sign in again.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	login := func(token, forwardedFor string) answer {
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		return f.anonymous().do(req)
	}
	for i := 1; i <= 5; i++ {
		if r := login("wrong-token-0123456789", ""); r.code != http.StatusUnauthorized {
			t.Fatalf("bad sign-in %d = %d, want 401", i, r.code)
		}
	}
	for _, token := range []string{"wrong-token-0123456789", adminToken} {
		if r := login(token, ""); r.code != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Errorf("sign-in after five failures = %d (Retry-After %q), want 429 with Retry-After", r.code, r.header.Get("Retry-After"))
		}
	}
	// The test server's peer is loopback, a trusted proxy: the address it
	// forwards is the client.
	if r := login(adminToken, "203.0.113.7"); r.code != http.StatusSeeOther {
		t.Errorf("another client's sign-in = %d, want 303", r.code)
	}
	f.clk.Advance(time.Minute + time.Second)
	if r := login(adminToken, ""); r.code != http.StatusSeeOther {
		t.Errorf("sign-in a minute later = %d, want 303", r.code)
	}
	// Failures spread wider than the window never block.
	for i := 1; i <= 8; i++ {
		if r := login("wrong-token-0123456789", "198.51.100.1"); r.code != http.StatusUnauthorized {
			t.Fatalf("spread bad sign-in %d = %d, want 401", i, r.code)
		}
		f.clk.Advance(15 * time.Second)
	}
}

// TestSignOutEndsTheSession: after signing out, the old cookie, replayed,
// no longer makes a session; another session of the same token still
// works.
func TestSignOutEndsTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	b, other := f.signIn(adminToken), f.signIn(adminToken)
	u, _ := url.Parse(f.srv.URL + "/ui/")
	old := b.c.Jar.Cookies(u)
	if r := b.post("/ui/logout", url.Values{"csrf": {b.csrf()}}); r.code != http.StatusSeeOther {
		t.Fatalf("logout = %d", r.code)
	}
	replay := f.anonymous()
	replay.c.Jar.SetCookies(u, old)
	if r := replay.get("/ui/"); r.code != http.StatusSeeOther || r.location != "/ui/login" {
		t.Errorf("the signed-out cookie replayed: GET /ui/ = %d to %q, want 303 to /ui/login", r.code, r.location)
	}
	if r := other.get("/ui/"); r.code != http.StatusOK {
		t.Errorf("another session after the sign-out: GET /ui/ = %d, want 200", r.code)
	}
}

// TestFormBounds: a form over 16 KiB is refused 413 (declared or not), a
// multipart one 415, before any of it is parsed; one at 16 KiB is read.
func TestFormBounds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("token", adminToken)
	mw.Close()
	pad := func(n int) string {
		v := url.Values{"token": {"x"}, "pad": {""}}.Encode()
		return v + strings.Repeat("a", n-len(v))
	}
	cases := []struct {
		name, contentType, body string
		chunked                 bool
		want                    int
	}{
		{"at the bound", "application/x-www-form-urlencoded", pad(MaxForm), false, http.StatusUnauthorized},
		{"over the bound", "application/x-www-form-urlencoded", pad(MaxForm + 1), false, http.StatusRequestEntityTooLarge},
		{"over the bound, undeclared", "application/x-www-form-urlencoded", pad(MaxForm + 1), true, http.StatusRequestEntityTooLarge},
		{"multipart", mw.FormDataContentType(), mp.String(), false, http.StatusUnsupportedMediaType},
		{"JSON", "application/json", `{"token":"x"}`, false, http.StatusUnsupportedMediaType},
	}
	for _, tc := range cases {
		var body = strings.NewReader(tc.body)
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/ui/login", body)
		if tc.chunked {
			req, _ = http.NewRequest(http.MethodPost, f.srv.URL+"/ui/login", struct{ *strings.Reader }{body})
		}
		req.Header.Set("Content-Type", tc.contentType)
		if r := f.anonymous().do(req); r.code != tc.want {
			t.Errorf("%s: POST /ui/login = %d, want %d", tc.name, r.code, tc.want)
		}
	}
}
