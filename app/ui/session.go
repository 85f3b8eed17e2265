package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Session kinds: what a signed-in operator may do.
const (
	KindAdmin = "admin" // every page and every action (GITLEASE_UI_TOKEN)
	KindView  = "view"  // every page, no action (GITLEASE_UI_VIEW_TOKEN)
)

// session is a signed-in operator, as the session cookie carries it.
type session struct {
	Kind    string
	Expires time.Time
	Nonce   string // random per sign-in; the CSRF token is derived from it
}

// errBadSession is why a cookie does not make a session: malformed, signed
// with another key, of an unknown kind or expired.
var errBadSession = errors.New("no valid dashboard session")

// sessionKey derives the cookie-signing key from the tokens, so every
// instance sharing them accepts the same cookies, and rotating either one
// (a leaked view token included) signs everyone out.
func sessionKey(adminToken, viewToken string) []byte {
	m := hmac.New(sha256.New, []byte(adminToken))
	m.Write([]byte("gitlease dashboard session v1\x00" + viewToken))
	return m.Sum(nil)
}

func mac(key []byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// newSession starts a session of kind lasting ttl from now.
func newSession(kind string, now time.Time, ttl time.Duration) (session, error) {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		return session{}, fmt.Errorf("make session nonce: %w", err)
	}
	return session{Kind: kind, Expires: now.Add(ttl).Truncate(time.Second), Nonce: b64.EncodeToString(b[:])}, nil
}

// encode renders the session as a cookie value: "v1.<kind>.<expiry>.<nonce>.<mac>".
func (s session) encode(key []byte) string {
	body := strings.Join([]string{"v1", s.Kind, strconv.FormatInt(s.Expires.Unix(), 10), s.Nonce}, ".")
	return body + "." + b64.EncodeToString(mac(key, "session", body))
}

// parseSession reads a cookie value written by encode. It returns
// errBadSession unless the value is well formed, signed with key, of a
// known kind and not expired at now.
func parseSession(key []byte, value string, now time.Time) (session, error) {
	if len(value) > 512 {
		return session{}, errBadSession
	}
	i := strings.LastIndexByte(value, '.')
	if i < 0 {
		return session{}, errBadSession
	}
	body, sig := value[:i], value[i+1:]
	got, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(key, "session", body)) {
		return session{}, errBadSession
	}
	parts := strings.Split(body, ".")
	if len(parts) != 4 || parts[0] != "v1" || (parts[1] != KindAdmin && parts[1] != KindView) || parts[3] == "" {
		return session{}, errBadSession
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !now.Before(time.Unix(exp, 0)) {
		return session{}, errBadSession
	}
	return session{Kind: parts[1], Expires: time.Unix(exp, 0), Nonce: parts[3]}, nil
}

// csrf is the token every form of this session carries: bound to the
// session's nonce, so a token from another session (or none) is refused.
func (s session) csrf(key []byte) string { return b64.EncodeToString(mac(key, "csrf", s.Nonce)) }

// checkCSRF reports whether token is this session's CSRF token.
func (s session) checkCSRF(key []byte, token string) bool {
	got, err := b64.DecodeString(token)
	return err == nil && token != "" && hmac.Equal(got, mac(key, "csrf", s.Nonce))
}
