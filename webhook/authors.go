package webhook

import (
	"fmt"
	"slices"
	"strings"
)

// AuthorsSetting is the setting that names who may start work (SPEC §6.2).
const AuthorsSetting = "GITLEASE_ALLOWED_AUTHORS"

// DefaultAllowedAuthors are the associations allowed when the setting is
// unset: people with write access to the repository.
const DefaultAllowedAuthors = "OWNER,MEMBER,COLLABORATOR"

// associations are GitHub's author_association values.
var associations = []string{"COLLABORATOR", "CONTRIBUTOR", "FIRST_TIMER", "FIRST_TIME_CONTRIBUTOR", "MANNEQUIN", "MEMBER", "NONE", "OWNER"}

// AllowedAuthors is who may start work: the author_association values an
// issue, pull request or comment command must have. The zero value is the
// default, DefaultAllowedAuthors.
type AllowedAuthors struct {
	any  bool
	list []string // upper case, in the order given; nil: the default
}

// ParseAllowedAuthors reads GITLEASE_ALLOWED_AUTHORS: "any", or a
// comma-separated list of GitHub's author associations (case-insensitive).
// Empty is the default.
func ParseAllowedAuthors(s string) (AllowedAuthors, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return AllowedAuthors{}, nil
	}
	if strings.EqualFold(s, "any") {
		return AllowedAuthors{any: true}, nil
	}
	var a AllowedAuthors
	for _, v := range strings.Split(s, ",") {
		v = strings.ToUpper(strings.TrimSpace(v))
		if v == "" {
			continue
		}
		if !slices.Contains(associations, v) {
			return AllowedAuthors{}, fmt.Errorf("%q is not a GitHub author association (%s) nor any", v, strings.Join(associations, ", "))
		}
		if !slices.Contains(a.list, v) {
			a.list = append(a.list, v)
		}
	}
	if len(a.list) == 0 {
		return AllowedAuthors{}, fmt.Errorf("%q names no author association", s)
	}
	return a, nil
}

// Allows reports whether an author with association assoc may start work.
func (a AllowedAuthors) Allows(assoc string) bool {
	if a.any {
		return true
	}
	list := a.list
	if list == nil {
		list = []string{"OWNER", "MEMBER", "COLLABORATOR"}
	}
	return slices.Contains(list, strings.ToUpper(assoc))
}

// String is the setting's value as it applies.
func (a AllowedAuthors) String() string {
	switch {
	case a.any:
		return "any"
	case a.list == nil:
		return DefaultAllowedAuthors
	}
	return strings.Join(a.list, ",")
}

// refuse is the ignore decision for an author the setting does not allow.
func (m *Mapper) refuse(d delivery, what, assoc string) Decision {
	if assoc == "" {
		assoc = "(none)"
	}
	return d.ignore("%s author association %s is not in %s=%s", what, assoc, AuthorsSetting, m.cfg.AllowedAuthors)
}
