package github_test

import (
	"context"
	"net/http"
	"slices"
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
	tok, revoke, err := inst.ItemToken(ctx, 4242, 1296269)
	if err != nil {
		t.Fatal(err)
	}
	status := func(path string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, gh.URL()+path, nil)
		req.Header.Set("Authorization", "token "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
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
	if _, _, err := inst.ItemToken(ctx, 4242, 999); err == nil {
		t.Error("a token for a repository outside the installation was minted")
	}
}
