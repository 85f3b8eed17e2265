package github_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
)

// TestItemToken: the token is minted for the one repository with the four
// permissions a worker needs; GitHub refuses it on another repository of
// the installation and for a write it has no permission for, and once
// revoked, everywhere. Revoking twice is fine.
func TestItemToken(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Lenient())
	gh.AddRepo("octo", "widgets", 1296269, "main", true)
	gh.AddRepo("octo", "secrets", 1296270, "main", true)
	gh.AddInstallation(4242, "octo/widgets", "octo/secrets")
	inst, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tok, revoke, err := inst.ItemToken(ctx, 4242, 1296269, false)
	if err != nil {
		t.Fatal(err)
	}
	status := func(path string) int { return withToken(t, gh, tok, http.MethodGet, path, "") }
	scopes := gh.TokenScopes()
	if len(scopes) != 1 || scopes[0].Token != tok || !slices.Equal(scopes[0].RepositoryIDs, []int64{1296269}) || len(scopes[0].Permissions) != 4 ||
		scopes[0].Permissions["contents"] != "write" || scopes[0].Permissions["pull_requests"] != "write" ||
		scopes[0].Permissions["checks"] != "write" || scopes[0].Permissions["metadata"] != "read" {
		t.Fatalf("minted %+v, want one token for repository 1296269 with contents, pull_requests, checks write and metadata read", scopes)
	}
	cases := []struct {
		path string
		want int
	}{
		{"repos/octo/widgets", http.StatusOK},
		{"repos/octo/secrets", http.StatusNotFound}, // out of scope: GitHub hides it
	}
	for _, tc := range cases {
		if got := status(tc.path); got != tc.want {
			t.Errorf("GET %s with the item token = %d, want %d", tc.path, got, tc.want)
		}
	}
	for range 2 {
		if err := revoke(ctx); err != nil {
			t.Fatalf("revoke: %v", err)
		}
	}
	if !gh.TokenScopes()[0].Revoked {
		t.Error("the token is not revoked")
	}
	if got := status("repos/octo/widgets"); got != http.StatusUnauthorized {
		t.Errorf("GET with the revoked token = %d, want 401", got)
	}
	if _, _, err := inst.ItemToken(ctx, 4242, 999, false); err == nil {
		t.Error("a token for a repository outside the installation was minted")
	}
}

// TestReadOnlyItemToken: a fork pull request's token reads the repository
// and is refused, by the fake as by GitHub, on a write.
func TestReadOnlyItemToken(t *testing.T) {
	t.Parallel()
	gh, inst := widgetsInstallation(t)
	ctx := context.Background()
	tok, revoke, err := inst.ItemToken(ctx, 4242, 1296269, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = revoke(ctx) }()
	sc := gh.TokenScopes()[0]
	if len(sc.Permissions) != 3 || sc.Permissions["contents"] != "read" || sc.Permissions["pull_requests"] != "read" || sc.Permissions["metadata"] != "read" {
		t.Fatalf("minted %+v, want contents, pull_requests and metadata read", sc.Permissions)
	}
	do := func(method, path, body string) int { return withToken(t, gh, tok, method, path, body) }
	if got := do(http.MethodGet, "repos/octo/widgets/git/ref/heads/main", ""); got != http.StatusOK {
		t.Errorf("read with the read-only token = %d, want 200", got)
	}
	if got := do(http.MethodPost, "repos/octo/widgets/git/refs", `{"ref":"refs/heads/x","sha":"`+strings.Repeat("a", 40)+`"}`); got != http.StatusForbidden {
		t.Errorf("write with the read-only token = %d, want 403", got)
	}
}

// TestItemTokenRevokeKeepsTheInstallationsLimits: revoking goes through
// the installation's limiter: GitHub's secondary limit answered to the
// revocation holds the installation's other calls, which the limiter
// refuses without calling GitHub.
func TestItemTokenRevokeKeepsTheInstallationsLimits(t *testing.T) {
	t.Parallel()
	gh, inst := widgetsInstallation(t)
	ctx := context.Background()
	client, err := inst.Client(4242)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Repositories.Get(ctx, "octo", "widgets"); err != nil { // the installation's token, minted now
		t.Fatal(err)
	}
	_, revoke, err := inst.ItemToken(ctx, 4242, 1296269, false)
	if err != nil {
		t.Fatal(err)
	}
	gh.SecondaryRateLimit(githubtest.KindRevokeToken, 1, 60)
	if err := revoke(ctx); err == nil {
		t.Fatal("revoke succeeded through a secondary limit")
	}
	before := gh.Count(githubtest.KindGetRepo)
	_, _, err = client.Repositories.Get(ctx, "octo", "widgets")
	var limited *github.LimitedError
	if !errors.As(err, &limited) || limited.Credential != "installation:4242" {
		t.Fatalf("installation call after the revocation's limit: %v, want a *LimitedError of installation:4242", err)
	}
	if got := gh.Count(githubtest.KindGetRepo); got != before || gh.EarlyCalls() != 0 {
		t.Errorf("GitHub saw %d more calls, %d early, want none", got-before, gh.EarlyCalls())
	}
}

// widgetsInstallation is the fake GitHub with octo/widgets in installation
// 4242, and the App's clients of it.
func widgetsInstallation(t *testing.T) (*githubtest.Server, *github.Installations) {
	t.Helper()
	gh := githubtest.New(t, githubtest.Lenient())
	gh.AddRepo("octo", "widgets", 1296269, "main", true)
	gh.AddInstallation(4242, "octo/widgets")
	inst, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return gh, inst
}

// withToken makes a request to the fake with an installation token and
// returns its status.
func withToken(t *testing.T, gh *githubtest.Server, tok, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, gh.URL()+path, strings.NewReader(body))
	req.Header.Set("Authorization", "token "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
