package githubtest

import (
	"net/http"
	"sort"
)

// KindRevokeToken is DELETE /installation/token, by which a token holder
// revokes its own installation access token.
const KindRevokeToken Kind = "revoke_token"

// handleRevokeToken serves DELETE /installation/token: it revokes the
// token the request is authenticated with (204). Later use of the token is
// answered 401 "Bad credentials" and recorded as a violation.
func (s *Server) handleRevokeToken(c *call) response {
	tok, res, ok := s.authToken(c)
	if !ok {
		return res
	}
	tok.revoked = true
	return response{status: http.StatusNoContent}
}

// TokenScope is what an installation access token the fake issued may do:
// the repositories it was narrowed to and its permissions.
type TokenScope struct {
	IssuedToken
	// RepositoryIDs are the repositories the token was narrowed to
	// (repository_ids or repositories), ascending; nil when it covers
	// every repository of the installation.
	RepositoryIDs []int64
	// Permissions are the token's permissions (the installation's when the
	// request did not narrow them).
	Permissions map[string]string
}

// TokenScopes returns every installation access token issued so far with
// its scope, oldest first, so a test can check that a token was minted for
// one repository and the permissions it needs, and whether it was revoked.
func (s *Server) TokenScopes() []TokenScope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TokenScope, 0, len(s.tokenList))
	for _, t := range s.tokenList {
		sc := TokenScope{
			IssuedToken: IssuedToken{Token: t.value, InstallationID: t.installationID, ExpiresAt: t.expires, Revoked: t.revoked},
			Permissions: map[string]string{},
		}
		for k, v := range t.permissions {
			sc.Permissions[k] = v
		}
		if t.repos != nil {
			sc.RepositoryIDs = []int64{}
			for full := range t.repos {
				sc.RepositoryIDs = append(sc.RepositoryIDs, s.repos[full].id)
			}
			sort.Slice(sc.RepositoryIDs, func(i, j int) bool { return sc.RepositoryIDs[i] < sc.RepositoryIDs[j] })
		}
		out = append(out, sc)
	}
	return out
}
