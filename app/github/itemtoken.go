package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	gh "github.com/google/go-github/v66/github"
)

// itemPermissions are the permissions of the token a worker command gets
// for its item (docs/github.md): enough to push its branch, update its pull
// request and report a check, nothing else of the installation.
func itemPermissions() *gh.InstallationPermissions {
	return &gh.InstallationPermissions{
		Contents:     gh.String("write"),
		PullRequests: gh.String("write"),
		Checks:       gh.String("write"),
		Metadata:     gh.String("read"),
	}
}

// ItemToken mints an installation access token for one item's command:
// scoped to repository repoID alone (repository_ids) and to
// itemPermissions, with the App's JWT (POST
// /app/installations/{id}/access_tokens). revoke revokes it (DELETE
// /installation/token, authenticated by the token itself); the caller
// calls it when the command ends, so the token dies with the command rather
// than an hour later. revoke is safe to call more than once; a token GitHub
// already counts as revoked or expired (401) is not an error.
//
// It returns an error, without a token, when installationID or repoID is
// not positive or GitHub refuses the request (the repository is not in the
// installation, or the installation lacks a permission).
func (in *Installations) ItemToken(ctx context.Context, installationID, repoID int64) (token string, revoke func(context.Context) error, err error) {
	if installationID <= 0 || repoID <= 0 {
		return "", nil, errors.New("an item token needs the item's installation and repository")
	}
	tok, _, err := in.AppClient().Apps.CreateInstallationToken(ctx, installationID, &gh.InstallationTokenOptions{
		RepositoryIDs: []int64{repoID},
		Permissions:   itemPermissions(),
	})
	if err != nil {
		return "", nil, fmt.Errorf("mint installation %d token for repository %d: %w", installationID, repoID, err)
	}
	value := tok.GetToken()
	revoked := false
	revoke = func(ctx context.Context) error {
		if revoked {
			return nil
		}
		c := in.newClient(doerTransport{in.apps.Client}).WithAuthToken(value)
		resp, err := c.Apps.RevokeInstallationToken(ctx)
		if err != nil && (resp == nil || resp.StatusCode != http.StatusUnauthorized) {
			return fmt.Errorf("revoke installation %d token: %w", installationID, err)
		}
		revoked = true
		return nil
	}
	return value, revoke, nil
}

// doerTransport sends requests through the client the App transport uses,
// so a token's own calls take the same way to GitHub as every other call.
type doerTransport struct {
	c interface {
		Do(*http.Request) (*http.Response, error)
	}
}

func (t doerTransport) RoundTrip(r *http.Request) (*http.Response, error) { return t.c.Do(r) }
