package githubtest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gitlease/gitlease/app/githubtest/openapi"
)

// app is a GitHub App the fake knows (the one New creates, and those created
// by manifest conversions).
type app struct {
	id          int64
	slug, name  string
	owner       string
	clientID    string
	key         *rsa.PrivateKey
	pem         []byte
	permissions map[string]string
	events      []string
	createdAt   time.Time
}

// installation is an installation of the fake's App on some repositories.
type installation struct {
	id          int64
	appID       int64
	account     string
	repos       []string // lower-case full names
	all         bool     // on every repository (WithAutoCreate's)
	permissions map[string]string
}

// sees reports whether the installation has repository full (lower-case).
func (in *installation) sees(full string) bool { return in.all || contains(in.repos, full) }

// installationRepos returns the lower-case full names of the repositories
// in has. s.mu is held.
func (s *Server) installationRepos(in *installation) []string {
	if in.all {
		return sortedKeys(s.repos)
	}
	return in.repos
}

// token is an installation access token.
type token struct {
	value          string
	installationID int64
	expires        time.Time
	repos          map[string]bool // nil: every repository of the installation
	permissions    map[string]string
	revoked        bool
}

func defaultPermissions() map[string]string {
	return map[string]string{
		"checks": "write", "contents": "write", "pull_requests": "write", "issues": "read", "metadata": "read",
	}
}

func defaultEvents() []string {
	return []string{"installation", "issue_comment", "issues", "pull_request"}
}

// AddInstallation installs the App on the given repositories ("owner/name",
// each added with AddRepo first) with gitlease's default permissions
// (checks, contents and pull_requests write; issues and metadata read).
// Tokens for installation id can then be created.
func (s *Server) AddInstallation(id int64, repos ...string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.installations[id]; ok {
		s.tb.Fatalf("githubtest: installation %d already exists", id)
		return
	}
	in := &installation{id: id, appID: s.AppID, permissions: defaultPermissions()}
	for _, full := range repos {
		rp := s.repos[strings.ToLower(full)]
		if rp == nil {
			s.tb.Fatalf("githubtest: AddInstallation(%d): repository %q not added (use AddRepo first)", id, full)
			return
		}
		if in.account == "" {
			in.account = rp.owner
		}
		in.repos = append(in.repos, strings.ToLower(full))
	}
	s.installations[id] = in
}

// SetInstallationPermissions replaces the permissions of installation id
// (e.g. {"checks": "read"}); "metadata": "read" is always granted. Requests
// needing more are answered 403 "Resource not accessible by integration".
// Tokens already issued keep the permissions they were issued with.
func (s *Server) SetInstallationPermissions(id int64, perms map[string]string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.installations[id]
	if in == nil {
		s.tb.Fatalf("githubtest: no installation %d", id)
		return
	}
	p := map[string]string{"metadata": "read"}
	for k, v := range perms {
		p[k] = v
	}
	in.permissions = p
}

// RevokeTokens revokes every installation access token issued so far; later
// requests with them are answered 401 "Bad credentials" (and fail the test,
// unless Lenient). Clients must obtain new tokens.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		t.revoked = true
	}
}

// Messages GitHub answers for rejected App JWTs.
const (
	msgJWTDecode   = "A JSON web token could not be decoded"
	msgJWTExp      = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	msgJWTExpFar   = "'Expiration time' claim ('exp') is too far in the future"
	msgJWTIat      = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	msgJWTIatPast  = "'Issued at' claim ('iat') must be an Integer representing a time in the past"
	msgJWTIssuer   = "'Issuer' claim ('iss') must be an Integer"
	msgIntegration = "Integration not found"
	msgBadCreds    = "Bad credentials"
)

// clockSkew is the drift GitHub tolerates between the client's clock and
// its own for iat and exp.
const clockSkew = 60 * time.Second

// verifyJWT checks an "Authorization: Bearer <jwt>" header the way GitHub
// checks App JWTs and returns the App, or GitHub's error message.
func (s *Server) verifyJWT(header string, now time.Time) (*app, string) {
	scheme, raw, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") || raw == "" {
		return nil, msgJWTDecode
	}
	parts := strings.Split(strings.TrimSpace(raw), ".")
	if len(parts) != 3 {
		return nil, msgJWTDecode
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	pb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, msgJWTDecode
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(hb, &hdr) != nil || hdr.Alg != "RS256" {
		return nil, msgJWTDecode
	}
	v, err := openapi.DecodeJSON(pb)
	claims, ok := v.(map[string]any)
	if err != nil || !ok {
		return nil, msgJWTDecode
	}
	var a *app
	switch iss := claims["iss"].(type) {
	case json.Number:
		id, err := iss.Int64()
		if err != nil {
			return nil, msgJWTIssuer
		}
		a = s.apps[id]
	case string:
		if id, err := strconv.ParseInt(iss, 10, 64); err == nil {
			a = s.apps[id]
		} else {
			for _, cand := range s.apps {
				if cand.clientID == iss {
					a = cand
				}
			}
		}
	default:
		return nil, msgJWTIssuer
	}
	if a == nil {
		return nil, msgIntegration
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&a.key.PublicKey, crypto.SHA256, digest[:], sig) != nil {
		return nil, msgJWTDecode
	}
	iat, ok := intClaim(claims, "iat")
	if !ok {
		return nil, msgJWTIat
	}
	exp, ok := intClaim(claims, "exp")
	if !ok {
		return nil, msgJWTExp
	}
	nowU := now.Unix()
	switch {
	case iat > nowU+int64(clockSkew/time.Second):
		return nil, msgJWTIatPast
	case exp <= nowU:
		return nil, msgJWTExp
	case exp-iat > 600, exp > nowU+600+int64(clockSkew/time.Second):
		return nil, msgJWTExpFar
	}
	return a, ""
}

// intClaim returns an integer claim; GitHub rejects fractional timestamps.
func intClaim(claims map[string]any, k string) (int64, bool) {
	n, ok := claims[k].(json.Number)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	return v, err == nil
}

// authToken checks an installation access token ("token X", "Bearer X" or
// Basic with the token as password).
func (s *Server) authToken(c *call) (*token, response, bool) {
	h := c.r.Header.Get("Authorization")
	if h == "" {
		c.violatef("no Authorization header: repositories are private, GitHub answers 404")
		return nil, c.notFound(), false
	}
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	switch strings.ToLower(scheme) {
	case "token", "bearer":
	case "basic":
		if raw, err := base64.StdEncoding.DecodeString(cred); err == nil {
			_, cred, _ = strings.Cut(string(raw), ":")
		}
	default:
		c.violatef("unsupported Authorization scheme %q", scheme)
		return nil, c.fail(http.StatusUnauthorized, msgBadCreds), false
	}
	t := s.tokens[cred]
	switch {
	case t == nil && strings.Count(cred, ".") == 2:
		c.violatef("App JWT used on a repository endpoint, which needs an installation access token")
		return nil, c.fail(http.StatusUnauthorized, msgBadCreds), false
	case t == nil:
		c.violatef("unknown access token")
		return nil, c.fail(http.StatusUnauthorized, msgBadCreds), false
	case t.revoked:
		c.violatef("access token was revoked")
		return nil, c.fail(http.StatusUnauthorized, msgBadCreds), false
	case !c.now.Before(t.expires):
		c.violatef("access token expired at %s", ts(t.expires))
		return nil, c.fail(http.StatusUnauthorized, msgBadCreds), false
	}
	return t, response{}, true
}

// resolveRepo finds the {owner}/{repo} of the path and checks the token can
// see it and has the permission the route needs.
func (s *Server) resolveRepo(c *call) (response, bool) {
	full := c.r.PathValue("owner") + "/" + c.r.PathValue("repo")
	rp := s.repos[strings.ToLower(full)]
	in := s.installations[c.tok.installationID]
	if rp == nil && s.cfg.autoCreate && in != nil && in.all {
		rp = s.newRepo(c.r.PathValue("owner"), c.r.PathValue("repo"), s.newID(), AutoDefaultBranch, true)
		if in.account == "" {
			in.account = rp.owner // what token requests name repositories under
		}
	}
	visible := rp != nil && in != nil && in.sees(strings.ToLower(full)) &&
		(c.tok.repos == nil || c.tok.repos[strings.ToLower(full)])
	if !visible {
		if rp == nil {
			c.violatef("no repository %s", full)
		} else {
			c.violatef("the token (installation %d) has no access to %s", c.tok.installationID, full)
		}
		return c.notFound(), false
	}
	c.repo = rp
	if c.rt.perm != "" {
		need := "read"
		if c.rt.write {
			need = "write"
		}
		if level(c.tok.permissions[c.rt.perm]) < level(need) {
			c.violatef("needs permission %s:%s, the token has %q", c.rt.perm, need, c.tok.permissions[c.rt.perm])
			return c.fail(http.StatusForbidden, "Resource not accessible by integration"), false
		}
	}
	return response{}, true
}

func level(p string) int {
	switch p {
	case "read":
		return 1
	case "write":
		return 2
	case "admin":
		return 3
	}
	return 0
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func (s *Server) accountJSON(login string, typ string) map[string]any {
	id := s.accountID(login)
	return map[string]any{
		"login": login, "id": id, "node_id": nodeID("O", id), "type": typ, "site_admin": false,
		"url": s.apiURL("users/%s", login), "html_url": s.htmlURL("%s", login),
		"avatar_url": "https://avatars.githubusercontent.com/u/" + strconv.FormatInt(id, 10),
	}
}

func (s *Server) accountID(login string) int64 {
	k := strings.ToLower(login)
	if id, ok := s.owners[k]; ok {
		return id
	}
	id := s.newID()
	s.owners[k] = id
	return id
}

// botJSON is the App's bot user, the author of what the App creates.
func (s *Server) botJSON() map[string]any {
	b := s.accountJSON(s.Slug+"[bot]", "Bot")
	return b
}

func (s *Server) botName() string { return s.Slug + "[bot]" }
func (s *Server) botEmail() string {
	return fmt.Sprintf("%d+%s[bot]@users.noreply.github.com", s.accountID(s.botName()), s.Slug)
}

func (s *Server) appJSON(a *app) map[string]any {
	return map[string]any{
		"id": a.id, "slug": a.slug, "node_id": nodeID("A", a.id), "client_id": a.clientID,
		"owner": s.accountJSON(a.owner, "Organization"), "name": a.name, "description": "",
		"external_url": "https://gitlease.example", "html_url": s.htmlURL("apps/%s", a.slug),
		"created_at": ts(a.createdAt), "updated_at": ts(a.createdAt),
		"permissions": a.permissions, "events": a.events, "installations_count": s.installationCount(a.id),
	}
}

func (s *Server) installationCount(appID int64) int {
	n := 0
	for _, in := range s.installations {
		if in.appID == appID {
			n++
		}
	}
	return n
}

// handleGetApp serves GET /app.
func (s *Server) handleGetApp(c *call) response {
	return response{status: http.StatusOK, body: s.appJSON(c.app)}
}

// handleAccessToken serves POST /app/installations/{installation_id}/access_tokens.
func (s *Server) handleAccessToken(c *call) response {
	id, err := strconv.ParseInt(c.r.PathValue("installation_id"), 10, 64)
	in := s.installations[id]
	if in == nil && err == nil && id > 0 && s.cfg.autoCreate && c.app.id == s.AppID {
		in = &installation{id: id, appID: s.AppID, all: true, permissions: defaultPermissions()}
		s.installations[id] = in
	}
	if err != nil || in == nil || in.appID != c.app.id {
		c.violatef("no installation %s of App %d", c.r.PathValue("installation_id"), c.app.id)
		return c.notFound()
	}
	t := &token{
		value: "ghs_" + randomString(36), installationID: id, expires: c.now.Add(s.cfg.tokenTTL).Truncate(time.Second),
		permissions: in.permissions,
	}
	selection := "all"
	var repoList []any
	names, _ := c.json["repositories"].([]any)
	ids, _ := c.json["repository_ids"].([]any)
	if len(names) > 0 || len(ids) > 0 {
		selection = "selected"
		t.repos = map[string]bool{}
		for _, n := range names {
			full := strings.ToLower(in.account + "/" + n.(string))
			if !in.sees(full) || s.repos[full] == nil {
				c.violatef("token requested for repository %q, not in installation %d", n, id)
				return c.fail(http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.")
			}
			t.repos[full] = true
		}
		for _, n := range ids {
			rid, _ := n.(json.Number).Int64()
			found := false
			for _, full := range s.installationRepos(in) {
				if s.repos[full].id == rid {
					t.repos[full], found = true, true
				}
			}
			if !found {
				c.violatef("token requested for repository ID %d, not in installation %d", rid, id)
				return c.fail(http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.")
			}
		}
		for _, full := range sortedKeys(t.repos) {
			repoList = append(repoList, s.repoJSON(s.repos[full]))
		}
	}
	if perms, ok := c.json["permissions"].(map[string]any); ok && len(perms) > 0 {
		narrowed := map[string]string{}
		for k, v := range perms {
			if level(v.(string)) > level(in.permissions[k]) {
				c.violatef("token requested %s:%s, installation %d has %q", k, v, id, in.permissions[k])
				return c.fail(http.StatusUnprocessableEntity, "The permissions requested are not granted to this installation.")
			}
			narrowed[k] = v.(string)
		}
		narrowed["metadata"] = "read"
		t.permissions = narrowed
	}
	s.tokens[t.value] = t
	s.tokenList = append(s.tokenList, t)
	body := map[string]any{
		"token": t.value, "expires_at": ts(t.expires), "permissions": t.permissions,
		"repository_selection": selection,
	}
	if repoList != nil {
		body["repositories"] = repoList
	}
	return response{status: http.StatusCreated, body: body}
}

// Tokens returns the installation access tokens issued so far, oldest
// first, e.g. to check that a worker's
// GITHUB_TOKEN is one the fake issued.
func (s *Server) Tokens() []IssuedToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]IssuedToken, 0, len(s.tokenList))
	for _, t := range s.tokenList {
		out = append(out, IssuedToken{Token: t.value, InstallationID: t.installationID, ExpiresAt: t.expires, Revoked: t.revoked})
	}
	return out
}

// IssuedToken is an installation access token the fake issued.
type IssuedToken struct {
	Token          string
	InstallationID int64
	ExpiresAt      time.Time
	Revoked        bool
}
