package githubtest_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/app/githubtest"
)

const (
	owner  = "octo-org"
	name   = "widgets"
	full   = owner + "/" + name
	instID = 77
)

// setup starts a fake with one repository (drafts allowed unless noDrafts)
// and one installation on it.
func setup(t *testing.T, noDrafts bool, opts ...githubtest.Option) (*githubtest.Server, githubtest.RepoInfo) {
	t.Helper()
	s := githubtest.New(t, opts...)
	info := s.AddRepo(owner, name, 9001, "main", !noDrafts)
	s.AddInstallation(instID, full)
	return s, info
}

// appClient is a go-github client authenticated as the App (JWT) through
// ghinstallation, as gitlease builds it.
func appClient(t *testing.T, s *githubtest.Server, appID int64, pem []byte) (*github.Client, *ghinstallation.AppsTransport) {
	t.Helper()
	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, appID, pem)
	if err != nil {
		t.Fatal(err)
	}
	atr.BaseURL = s.BaseURL()
	return withBase(t, github.NewClient(&http.Client{Transport: atr}), s), atr
}

// installationClient is a go-github client authenticated with installation
// tokens from ghinstallation.
func installationClient(t *testing.T, s *githubtest.Server, id int64) (*github.Client, *ghinstallation.Transport) {
	t.Helper()
	_, atr := appClient(t, s, s.AppID, s.PrivateKeyPEM)
	itr := ghinstallation.NewFromAppsTransport(atr, id)
	itr.BaseURL = s.BaseURL()
	return withBase(t, github.NewClient(&http.Client{Transport: itr}), s), itr
}

func withBase(t *testing.T, c *github.Client, s *githubtest.Server) *github.Client {
	t.Helper()
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = u
	return c
}

// rawRequest sends a request with an explicit Authorization header.
func rawRequest(t *testing.T, s *githubtest.Server, method, path, auth string, body any) (*http.Response, map[string]any) {
	t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, s.BaseURL()+path, rd)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res, m
}

// signJWT signs claims with RS256, the way an App JWT is made.
func signJWT(t *testing.T, key *rsa.PrivateKey, claims string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims))
	digest := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + enc.EncodeToString(sig)
}

// errorStatus returns the HTTP status of a go-github error (0 if none).
func errorStatus(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// newBranch creates branch from main's head with one empty commit, the way
// gitlease provisions one, and returns the new head SHA.
func newBranch(t *testing.T, ctx context.Context, c *github.Client, info githubtest.RepoInfo, branch string) string {
	t.Helper()
	cm, _, err := c.Git.CreateCommit(ctx, owner, name, &github.Commit{
		Message: github.String("gitlease: start " + branch),
		Tree:    &github.Tree{SHA: github.String(info.TreeSHA)},
		Parents: []*github.Commit{{SHA: github.String(info.HeadSHA)}},
	}, nil)
	if err != nil {
		t.Fatalf("create commit: %v", err)
	}
	_, _, err = c.Git.CreateRef(ctx, owner, name, &github.Reference{
		Ref: github.String("refs/heads/" + branch), Object: &github.GitObject{SHA: cm.SHA},
	})
	if err != nil {
		t.Fatalf("create ref: %v", err)
	}
	return cm.GetSHA()
}

// recordingTB captures Errorf calls, to test that violations fail the test.
type recordingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

func jwtClaims(iss any, iat, exp int64) string {
	b, _ := json.Marshal(map[string]any{"iss": iss, "iat": iat, "exp": exp})
	return string(b)
}

func now() int64 { return time.Now().Unix() }
