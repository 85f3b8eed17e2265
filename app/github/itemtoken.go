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

// readOnlyItemPermissions are the permissions of the token of a pull
// request whose head is in a fork (SPEC §6.2): its command may read the
// repository and the pull request, and write nothing.
func readOnlyItemPermissions() *gh.InstallationPermissions {
	return &gh.InstallationPermissions{
		Contents:     gh.String("read"),
		PullRequests: gh.String("read"),
		Metadata:     gh.String("read"),
	}
}

// ItemToken mints an installation access token for one item's command:
// scoped to repository repoID alone (repository_ids) and to
// itemPermissions (readOnlyItemPermissions when readOnly), with the App's JWT (POST
// /app/installations/{id}/access_tokens). revoke revokes it (DELETE
// /installation/token, authenticated by the token itself, through the
// installation's limiter, as every call with the token); the caller
// calls it when the command ends, so the token dies with the command rather
// than an hour later. revoke is safe to call more than once; a token GitHub
// already counts as revoked or expired (401) is not an error.
//
// It returns an error, without a token, when installationID or repoID is
// not positive or GitHub refuses the request (the repository is not in the
// installation, or the installation lacks a permission).
func (in *Installations) ItemToken(ctx context.Context, installationID, repoID int64, readOnly bool) (token string, revoke func(context.Context) error, err error) {
	if installationID <= 0 || repoID <= 0 {
		return "", nil, errors.New("an item token needs the item's installation and repository")
	}
	perms := itemPermissions()
	if readOnly {
		perms = readOnlyItemPermissions()
	}
	tok, _, err := in.AppClient().Apps.CreateInstallationToken(ctx, installationID, &gh.InstallationTokenOptions{
		RepositoryIDs: []int64{repoID},
		Permissions:   perms,
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
		c := in.ItemClient(installationID, value)
		resp, err := c.Apps.RevokeInstallationToken(ctx)
		if err != nil && (resp == nil || resp.StatusCode != http.StatusUnauthorized) {
			return fmt.Errorf("revoke installation %d token: %w", installationID, err)
		}
		revoked = true
		return nil
	}
	return value, revoke, nil
}

// ItemClient returns a client authenticated with an item's token that
// counts against its installation's limits (the "token" scheme, not
// "Bearer", which the limiter reads as the App's JWT): a rate-limit answer
// to a call with the token holds every call of the installation, and one
// holding them holds this call too.
func (in *Installations) ItemClient(installationID int64, token string) *gh.Client {
	return in.newClient(asInstallation{id: installationID, next: tokenAuth{token: token, next: doerTransport{in.apps.Client}}})
}

// tokenAuth authenticates requests with an installation access token.
type tokenAuth struct {
	token string
	next  http.RoundTripper
}

func (t tokenAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "token "+t.token)
	return t.next.RoundTrip(r)
}

// doerTransport sends requests through the client the App transport uses,
// so a token's own calls take the same way to GitHub as every other call.
type doerTransport struct {
	c interface {
		Do(*http.Request) (*http.Response, error)
	}
}

func (t doerTransport) RoundTrip(r *http.Request) (*http.Response, error) { return t.c.Do(r) }
