package webhook

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-github/v66/github"
)

// parseOptions make the single-pass decoder (the encoding/json/v2 design,
// validating while it decodes instead of scanning the payload twice) as
// forgiving as encoding/json where GitHub's payloads could differ: a
// repeated name keeps its last value, invalid UTF-8 reads as U+FFFD. Names
// match exactly, as GitHub spells them: a new field that differs from a used
// one only in case or underscores is another field.
var parseOptions = jsonv2.JoinOptions(
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
)

// The events the mapper acts on. Every other event is answered from its
// envelope alone.
const (
	eventIssues       = "issues"
	eventPullRequest  = "pull_request"
	eventIssueComment = "issue_comment"
)

// actsOn reports whether gitlease reads more of event than its envelope.
func actsOn(event string) bool {
	switch event {
	case eventIssues, eventPullRequest, eventIssueComment:
		return true
	}
	return false
}

// envelope is the shape every GitHub event payload shares, and all that is
// read of an event gitlease does not act on.
type envelope struct {
	Action       *string `json:"action"`
	Installation *struct {
		ID *int64 `json:"id"`
	} `json:"installation"`
	Repository *envelopeRepo `json:"repository"`
	Sender     *struct {
		Login *string `json:"login"`
		Type  *string `json:"type"` // "Bot" for an App's account
	} `json:"sender"`
}

// senderType is the sender's account type ("User", "Bot", …), or "".
func (e *envelope) senderType() string {
	if e.Sender == nil || e.Sender.Type == nil {
		return ""
	}
	return *e.Sender.Type
}

// envelopeRepo is the envelope's repository.
type envelopeRepo struct {
	ID       *int64  `json:"id"`
	FullName *string `json:"full_name"`
}

// payload is the envelope plus exactly the fields the mapper uses of the
// events it acts on: one parse, and a variant in any other field (an old
// timestamp format, a new field) is never looked at.
type payload struct {
	envelope
	// Repository shadows the envelope's: the same object, with the default
	// branch too.
	Repository  *repoFields    `json:"repository"`
	Issue       *issueFields   `json:"issue"`
	PullRequest *prFields      `json:"pull_request"`
	Comment     *commentFields `json:"comment"`
	Label       *labelFields   `json:"label"`
}

type repoFields struct {
	ID            int64  `json:"id"`
	FullName      string `json:"full_name"`
	DefaultBranch string `json:"default_branch"`
}

type labelFields struct {
	Name string `json:"name"`
}

// subjectFields are what an issue and a pull request both carry.
type subjectFields struct {
	Number    int           `json:"number"`
	State     string        `json:"state"`
	Title     string        `json:"title"`
	Body      string        `json:"body"`
	HTMLURL   string        `json:"html_url"`
	Labels    []labelFields `json:"labels"`
	UpdatedAt lenientTime   `json:"updated_at"`
	// AuthorAssociation is the author's relation to the repository
	// (OWNER, MEMBER, COLLABORATOR, NONE, …): who may start work.
	AuthorAssociation string `json:"author_association"`
}

type issueFields struct {
	subjectFields
	// PullRequest is present when the issue is a pull request.
	PullRequest presence `json:"pull_request"`
}

type prFields struct {
	subjectFields
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
	Head struct {
		Ref  string `json:"ref"`
		SHA  string `json:"sha"`
		Repo *struct {
			ID int64 `json:"id"`
		} `json:"repo"`
	} `json:"head"`
}

type commentFields struct {
	ID                int64       `json:"id"`
	Body              string      `json:"body"`
	AuthorAssociation string      `json:"author_association"`
	CreatedAt         lenientTime `json:"created_at"`
}

// lenientTime is a timestamp gitlease reads but does not depend on: an
// RFC 3339 string, Unix seconds (older payloads) or anything else, which
// reads as the zero time instead of failing the delivery.
type lenientTime struct{ time.Time }

// UnmarshalJSON never fails.
func (t *lenientTime) UnmarshalJSON(b []byte) error {
	t.Time = time.Time{}
	switch {
	case len(b) > 1 && b[0] == '"':
		var s string
		if json.Unmarshal(b, &s) != nil {
			return nil
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05Z0700", "2006-01-02 15:04:05 -0700", "2006-01-02 15:04:05 MST"} {
			if v, err := time.Parse(layout, s); err == nil {
				t.Time = v
				return nil
			}
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			t.Time = time.Unix(n, 0)
		}
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		if f, err := strconv.ParseFloat(string(b), 64); err == nil && f > 0 && f < 253402300800 {
			t.Time = time.Unix(int64(f), 0)
		}
	}
	return nil
}

// presence records whether a field is there and not null, whatever it holds.
type presence bool

// UnmarshalJSON never fails.
func (p *presence) UnmarshalJSON(b []byte) error {
	*p = presence(!bytes.Equal(b, []byte("null")))
	return nil
}

// parsePayload reads a payload in one parse: the envelope of any event, and
// for the events gitlease acts on the fields it uses. Text PostgreSQL cannot
// store (NUL) is removed from every string read. It returns a *PayloadError
// when the payload is not a JSON object or a field read has the wrong type.
func parsePayload(event string, body []byte) (payload, error) {
	var p payload
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return p, payloadErrorf(event, "not a JSON object")
	}
	var err error
	if actsOn(event) {
		err = jsonv2.Unmarshal(trimmed, &p, parseOptions)
	} else {
		err = jsonv2.Unmarshal(trimmed, &p.envelope, parseOptions)
	}
	if err != nil {
		return payload{}, payloadErrorf(event, "JSON does not parse: %v", err)
	}
	p.liftRepository()
	p.clean()
	return p, nil
}

// liftRepository points the envelope's repository at the one the payload
// parsed with its default branch, when it did.
func (p *payload) liftRepository() {
	if r := p.Repository; r != nil {
		p.envelope.Repository = &envelopeRepo{ID: &r.ID, FullName: &r.FullName}
	}
}

// facts are the envelope's Facts.
func (e *envelope) facts() Facts {
	var f Facts
	f.Action = e.Action
	if e.Installation != nil {
		f.InstallationID = e.Installation.ID
	}
	if e.Repository != nil {
		f.RepositoryID, f.Repository = e.Repository.ID, e.Repository.FullName
	}
	if e.Sender != nil {
		f.Sender = e.Sender.Login
	}
	return f
}

// clean removes NUL from every string of p.
func (p *payload) clean() {
	cleanPtr(p.Action)
	if p.Sender != nil {
		cleanPtr(p.Sender.Login)
	}
	if r := p.envelope.Repository; r != nil {
		cleanPtr(r.FullName)
	}
	if r := p.Repository; r != nil {
		cleanStr(&r.FullName, &r.DefaultBranch)
	}
	if l := p.Label; l != nil {
		cleanStr(&l.Name)
	}
	if i := p.Issue; i != nil {
		i.subjectFields.clean()
	}
	if pr := p.PullRequest; pr != nil {
		pr.clean()
	}
	if c := p.Comment; c != nil {
		cleanStr(&c.Body, &c.AuthorAssociation)
	}
}

func (pr *prFields) clean() {
	pr.subjectFields.clean()
	cleanStr(&pr.Base.Ref, &pr.Head.Ref, &pr.Head.SHA)
}

func (sf *subjectFields) clean() {
	cleanStr(&sf.State, &sf.Title, &sf.Body, &sf.HTMLURL, &sf.AuthorAssociation)
	for i := range sf.Labels {
		cleanStr(&sf.Labels[i].Name)
	}
}

func cleanPtr(s *string) {
	if s != nil {
		cleanStr(s)
	}
}

// cleanStr removes the NUL characters PostgreSQL's text and jsonb cannot
// hold.
func cleanStr(ss ...*string) {
	for _, s := range ss {
		if strings.IndexByte(*s, 0) >= 0 {
			*s = strings.ReplaceAll(*s, "\x00", "")
		}
	}
}

// prFieldsOf takes the fields the mapper uses from a pull request fetched
// from GitHub.
func prFieldsOf(pr *github.PullRequest) *prFields {
	out := &prFields{subjectFields: subjectFields{
		Number: pr.GetNumber(), State: pr.GetState(), Title: pr.GetTitle(), Body: pr.GetBody(),
		HTMLURL: pr.GetHTMLURL(), UpdatedAt: lenientTime{pr.GetUpdatedAt().Time},
		AuthorAssociation: pr.GetAuthorAssociation(),
	}}
	for _, l := range pr.Labels {
		out.Labels = append(out.Labels, labelFields{Name: l.GetName()})
	}
	out.Base.Ref = pr.GetBase().GetRef()
	out.Head.Ref, out.Head.SHA = pr.GetHead().GetRef(), pr.GetHead().GetSHA()
	if r := pr.GetHead().GetRepo(); r != nil {
		out.Head.Repo = &struct {
			ID int64 `json:"id"`
		}{ID: r.GetID()}
	}
	out.clean()
	return out
}
