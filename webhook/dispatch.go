package webhook

import (
	"encoding/json"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/gitlease/gitlease/queue"
)

// metaOptions read metadata as encoding/json would (names matched without
// regard to case, as well as parseOptions' leniency) in the single-pass
// decoder, which reads a new item's metadata far faster than encoding/json
// (docs/benchmarks-history.md).
var metaOptions = jsonv2.JoinOptions(parseOptions, jsonv2.MatchCaseInsensitiveNames(true))

// ItemMeta is what the intake wrote into a dispatch about where its item
// lives on GitHub: the subject's kind and its Metadata. The GitHub side and
// the workers read it back with ReadMeta; it has this one definition.
type ItemMeta struct {
	Kind string
	Metadata
}

// ReadMeta reads an item's GitHub metadata from its dispatch. ok is false
// when the dispatch does not name a GitHub issue or pull request with an
// installation, a repository and a number (an item enqueued over /rpc
// without them).
func ReadMeta(dispatch json.RawMessage) (m ItemMeta, ok bool) {
	var d struct {
		Subject struct {
			Kind     string   `json:"kind"`
			Metadata Metadata `json:"metadata"`
		} `json:"subject"`
	}
	if jsonv2.Unmarshal(dispatch, &d, metaOptions) != nil {
		return m, false
	}
	return checkMeta(ItemMeta{Kind: d.Subject.Kind, Metadata: d.Subject.Metadata})
}

// SubjectMeta is ReadMeta for a subject held as Go values (the one an item
// was just enqueued with, or a Decision's): it reads only the small
// metadata object, not the whole dispatch with its description.
func SubjectMeta(s *queue.SubjectRef) (m ItemMeta, ok bool) {
	if s == nil {
		return m, false
	}
	m.Kind = s.Kind
	if len(s.Metadata) > 0 && jsonv2.Unmarshal(s.Metadata, &m.Metadata, metaOptions) != nil {
		return ItemMeta{Kind: s.Kind}, false
	}
	return checkMeta(m)
}

func checkMeta(m ItemMeta) (ItemMeta, bool) {
	owner, name, _ := strings.Cut(m.Repository, "/")
	isGitHub := m.Kind == KindIssue || m.Kind == KindPullRequest
	return m, isGitHub && m.InstallationID > 0 && owner != "" && name != "" && m.Number > 0
}
