package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// Subject kinds and the workflow gitlease enqueues.
const (
	KindIssue       = "github_issue"
	KindPullRequest = "github_pull_request"
	WorkflowCoding  = "coding"
)

// Comment commands: a comment starting with CommentCommand asks gitlease
// to run its issue or pull request, one starting with CancelCommand to
// cancel its live item.
const (
	CommentCommand = "/gitlease run"
	CancelCommand  = "/gitlease cancel"
)

// ReasonNoPullRequestGetter is the ignore reason of a comment command on a
// pull request when no GitHub App credentials are configured.
const ReasonNoPullRequestGetter = "pull request lookup needs GitHub App credentials"

// PullRequestGetter fetches a pull request
// (GET /repos/{owner}/{repo}/pulls/{number}) as the given installation. The
// mapper needs it for a comment command on a pull request, whose payload
// carries the issue side only, without refs or head SHA.
type PullRequestGetter interface {
	PullRequest(ctx context.Context, installationID int64, owner, repo string, number int) (*github.PullRequest, error)
}

// LookupError is returned by Mapper.Map when asking GitHub what a delivery
// needs (a pull request, the App's bot login) failed. It is no fault of the
// delivery, which can be redelivered.
type LookupError struct{ Err error }

func (e *LookupError) Error() string { return "look up on GitHub: " + e.Err.Error() }

func (e *LookupError) Unwrap() error { return e.Err }

// MapperConfig configures a Mapper.
type MapperConfig struct {
	// TriggerLabel, if set, restricts enqueueing to issues and pull requests
	// carrying it and makes adding it (a labeled action) enqueue.
	TriggerLabel string
	// BranchPrefix goes before issue-<number> in an issue's head branch
	// (GITLEASE_BRANCH_PREFIX, gitlease/ by default in cmd). Empty means no
	// prefix.
	BranchPrefix string
	// BotLogin is the App's own account, "<slug>[bot]" (from
	// GITHUB_APP_SLUG); events it sent are ignored. Empty: Bot decides.
	BotLogin string
	// Bot, if set, is asked lazily for the App's bot login when a sender of
	// type Bot does not match BotLogin. Nil recognises no other bot.
	Bot BotIdentity
	// Now stamps requested_at when a payload carries no usable time;
	// time.Now when nil.
	Now func() time.Time
	// AppID is the App's numeric ID (GITHUB_APP_ID): a Re-run is acted on
	// only for its own check runs. 0 ignores every Re-run.
	AppID int64
	// AllowedAuthors is who may start work (GITLEASE_ALLOWED_AUTHORS);
	// the zero value allows owners, members and collaborators.
	AllowedAuthors AllowedAuthors
}

// Mapper turns a GitHub event into a queue decision (docs/webhook.md). It keeps no
// state between calls and is safe for concurrent use.
type Mapper struct {
	prs PullRequestGetter
	cfg MapperConfig
}

// NewMapper returns a Mapper. prs may be nil (no GitHub App credentials):
// a comment command on a pull request is then ignored with
// ReasonNoPullRequestGetter. It returns an error when cfg.BranchPrefix would
// make invalid branch names.
func NewMapper(prs PullRequestGetter, cfg MapperConfig) (*Mapper, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	probe := queue.Reservation{Repository: "o/r", BaseRef: "refs/heads/main", HeadRef: "refs/heads/" + cfg.BranchPrefix + "issue-1"}
	if err := queue.ValidateReservation(probe); err != nil || strings.ContainsAny(cfg.BranchPrefix, " ~^:?*[\\") {
		return nil, fmt.Errorf("branch prefix %q does not make valid branch names", cfg.BranchPrefix)
	}
	return &Mapper{prs: prs, cfg: cfg}, nil
}

// Kind says what a delivery asks of the queue.
type Kind int

// The kinds of decision.
const (
	// KindIgnore: nothing to do; Decision.Reason says why.
	KindIgnore Kind = iota
	// KindEnqueue: create the item in Decision.Enqueue.
	KindEnqueue
	// KindCancel: cancel the live items of Decision.QualifiedID.
	KindCancel
)

func (k Kind) String() string {
	switch k {
	case KindEnqueue:
		return "enqueue"
	case KindCancel:
		return "cancel"
	case KindCancelInstallation:
		return "cancel_installation"
	case KindRerun:
		return "rerun"
	}
	return "ignore"
}

// Decision is what the mapper made of a delivery.
type Decision struct {
	Kind Kind
	// Facts are the delivery's action, installation, repository and sender,
	// recorded whatever the decision.
	Facts Facts
	// QualifiedID is the subject to enqueue or cancel.
	QualifiedID string
	// Enqueue is the request for KindEnqueue, keyed by the delivery ID.
	Enqueue queue.EnqueueParams
	// Reason says why a delivery is ignored.
	Reason string
	// Installation is what KindCancelInstallation takes away (lifecycle.go).
	Installation *InstallationScope
	// Rerun is the Re-run of KindRerun (rerun.go).
	Rerun *RerunRequest
	// CancelReason says, for KindCancel, who cancelled and how ("Cancelled
	// by @octo with /gitlease cancel"); it becomes the items' end reason.
	CancelReason string
	// CheckRun, for KindCancel, is the check run whose Cancel button was
	// pressed (cancel.go): the handler cancels its entry, once it has
	// checked the entry is this App's, live and of this installation.
	CheckRun *CheckRunCancel
}

// Metadata is the subject metadata of every item gitlease enqueues from
// GitHub; workers and the GitHub side read it back from the dispatch.
type Metadata struct {
	InstallationID int64  `json:"installation_id,omitempty"`
	RepositoryID   int64  `json:"repository_id"`
	Repository     string `json:"repository"`
	Number         int    `json:"number"`
	HTMLURL        string `json:"html_url,omitempty"`
	HeadSHA        string `json:"head_sha,omitempty"`
	Event          string `json:"event"`
	Action         string `json:"action"`
	DeliveryID     string `json:"delivery_id"`
	Sender         string `json:"sender"`
	// CommentID is the comment that carried a /gitlease run command.
	CommentID int64 `json:"comment_id,omitempty"`
	// HeadInFork marks a pull request whose head is in a fork: its
	// command gets a read-only token (SPEC §6.2).
	HeadInFork bool `json:"head_in_fork,omitempty"`
}

// QualifiedID returns the qualified subject ID of an issue or pull request:
// "<kind>:<repository id>#<number>". The numeric repository ID survives
// renames and transfers of the repository.
func QualifiedID(kind string, repositoryID int64, number int) string {
	return kind + ":" + nativeID(repositoryID, number)
}

func nativeID(repositoryID int64, number int) string {
	return strconv.FormatInt(repositoryID, 10) + "#" + strconv.Itoa(number)
}

// delivery is what Map works from.
type delivery struct {
	event, deliveryID string
	facts             Facts
}

func (d delivery) ignore(format string, args ...any) Decision {
	return Decision{Kind: KindIgnore, Facts: d.facts, Reason: fmt.Sprintf(format, args...)}
}

func (d delivery) action() string {
	if d.facts.Action == nil {
		return ""
	}
	return *d.facts.Action
}

// Map decides what the delivery deliveryID of event, with the JSON payload,
// asks of the queue: enqueue an issue or pull request, cancel a closed one,
// or nothing (docs/webhook.md). ctx bounds the one GitHub call it may make, for a
// comment command on a pull request.
//
// An event gitlease does not act on is ignored after reading only its
// envelope (action, installation, repository, sender); of the events it acts
// on it reads only the fields it uses, in one parse, so a variant in any
// other field never fails a delivery. It returns a *PayloadError when the
// payload is not a JSON object, a field it reads has the wrong type, or the
// event lacks a part gitlease needs (its repository, issue or pull request),
// and a *LookupError when that pull request could not be fetched.
func (m *Mapper) Map(ctx context.Context, event, deliveryID string, body []byte) (Decision, error) {
	p, err := parsePayload(event, body)
	if err != nil {
		return Decision{}, err
	}
	facts := p.facts()
	d := delivery{event: event, deliveryID: deliveryID, facts: facts}
	if event == "ping" {
		return d.ignore("ping"), nil
	}
	switch event { // parsed leniently: only the fields used
	case "installation", "installation_repositories":
		return m.lifecycle(d, body)
	case "check_run", "check_suite":
		if d.action() == "rerequested" && m.cfg.AppID != 0 {
			// The App's own Re-run must not start work (SPEC §6).
			if own, login, err := m.sentByItself(ctx, facts, p.senderType()); err != nil || own {
				if err != nil {
					return Decision{}, err
				}
				return d.ignore("sent by gitlease itself (%s)", login), nil
			}
		}
		return m.rerun(d, body)
	}
	if !actsOn(event) {
		return d.ignore("event %q is not handled", event), nil
	}
	if own, login, err := m.sentByItself(ctx, facts, p.senderType()); err != nil || own {
		if err != nil {
			return Decision{}, err
		}
		return d.ignore("sent by gitlease itself (%s)", login), nil
	}
	switch event {
	case eventIssues:
		return m.issues(d, &p)
	case eventPullRequest:
		return m.pullRequest(d, &p)
	}
	return m.issueComment(ctx, d, &p)
}

// issues maps an issues event.
func (m *Mapper) issues(d delivery, ev *payload) (Decision, error) {
	action := d.action()
	switch action {
	case "opened", "reopened", "labeled", "closed":
	default:
		return d.ignore("issues action %q is not handled", action), nil
	}
	repo, err := requireRepo(d.event, ev.Repository)
	if err != nil {
		return Decision{}, err
	}
	issue := ev.Issue
	if issue == nil || issue.Number <= 0 {
		return Decision{}, payloadErrorf(d.event, "no issue with a number")
	}
	if action == "closed" {
		return cancel(d, KindIssue, repo.ID, issue.Number, closedBy(d, "issue")), nil
	}
	if ignored, ok := m.triggered(d, action, "issue", issue.State, issue.Labels, ev.Label); !ok {
		return ignored, nil
	}
	if !m.cfg.AllowedAuthors.Allows(issue.AuthorAssociation) {
		return m.refuse(d, "issue", issue.AuthorAssociation), nil
	}
	return m.enqueueIssue(d, repo, issue, nil)
}

// pullRequest maps a pull_request event.
func (m *Mapper) pullRequest(d delivery, ev *payload) (Decision, error) {
	action := d.action()
	switch action {
	case "opened", "reopened", "synchronize", "ready_for_review", "labeled", "closed":
	default:
		return d.ignore("pull_request action %q is not handled", action), nil
	}
	repo, err := requireRepo(d.event, ev.Repository)
	if err != nil {
		return Decision{}, err
	}
	pr := ev.PullRequest
	if pr == nil || pr.Number <= 0 {
		return Decision{}, payloadErrorf(d.event, "no pull_request with a number")
	}
	if action == "closed" {
		return cancel(d, KindPullRequest, repo.ID, pr.Number, closedBy(d, "pull request")), nil
	}
	if ignored, ok := m.triggered(d, action, "pull request", pr.State, pr.Labels, ev.Label); !ok {
		return ignored, nil
	}
	if !m.cfg.AllowedAuthors.Allows(pr.AuthorAssociation) {
		return m.refuse(d, "pull request", pr.AuthorAssociation), nil
	}
	return m.enqueuePullRequest(d, repo, pr, nil)
}

// issueComment maps an issue_comment event: a /gitlease run command from
// an allowed author (§6.2) enqueues its issue or pull request, a
// /gitlease cancel command from the same authors cancels its live item. One
// author check decides both.
func (m *Mapper) issueComment(ctx context.Context, d delivery, ev *payload) (Decision, error) {
	if action := d.action(); action != "created" {
		return d.ignore("issue_comment action %q is not handled", action), nil
	}
	comment := ev.Comment
	if comment == nil {
		return Decision{}, payloadErrorf(d.event, "no comment")
	}
	command := commandOf(comment.Body)
	if command == "" {
		return d.ignore("comment is not a %s or %s command", CommentCommand, CancelCommand), nil
	}
	// The comment's author decides, whoever wrote the issue: a
	// collaborator may start work on a stranger's issue.
	if !m.cfg.AllowedAuthors.Allows(comment.AuthorAssociation) {
		return m.refuse(d, "comment", comment.AuthorAssociation), nil
	}
	repo, err := requireRepo(d.event, ev.Repository)
	if err != nil {
		return Decision{}, err
	}
	issue := ev.Issue
	if issue == nil || issue.Number <= 0 {
		return Decision{}, payloadErrorf(d.event, "no issue with a number")
	}
	if command == CancelCommand {
		kind := KindIssue
		if issue.PullRequest {
			kind = KindPullRequest
		}
		return cancel(d, kind, repo.ID, issue.Number, fmt.Sprintf("Cancelled by @%s with %s", dbq.Deref(d.facts.Sender), CancelCommand)), nil
	}
	if issue.State == "closed" {
		return d.ignore("%s is closed", describe(issue)), nil
	}
	if !issue.PullRequest {
		return m.enqueueIssue(d, repo, issue, comment)
	}
	if m.prs == nil {
		return d.ignore(ReasonNoPullRequestGetter), nil
	}
	if d.facts.InstallationID == nil {
		return d.ignore("no installation in the payload to look the pull request up with"), nil
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	fetched, err := m.prs.PullRequest(ctx, *d.facts.InstallationID, owner, name, issue.Number)
	if err != nil {
		return Decision{}, &LookupError{Err: fmt.Errorf("%s#%d: %w", repo.FullName, issue.Number, err)}
	}
	if fetched == nil || fetched.GetNumber() != issue.Number {
		return Decision{}, &LookupError{Err: fmt.Errorf("%s#%d: GitHub returned another or no pull request", repo.FullName, issue.Number)}
	}
	dec, err := m.enqueuePullRequest(d, repo, prFieldsOf(fetched), comment)
	var perr *PayloadError
	if errors.As(err, &perr) {
		// The fetched pull request, not the delivery, lacks a part.
		return Decision{}, &LookupError{Err: perr}
	}
	return dec, err
}

func describe(issue *issueFields) string {
	if issue.PullRequest {
		return "pull request"
	}
	return "issue"
}

// commandOf is the comment command a body holds (CommentCommand or
// CancelCommand), or "": the body starts (after blank space) with the
// command as a whole word.
func commandOf(body string) string {
	body = strings.TrimLeft(body, " \t\r\n")
	for _, c := range []string{CommentCommand, CancelCommand} {
		if rest, ok := strings.CutPrefix(body, c); ok && (rest == "" || strings.ContainsAny(rest[:1], " \t\r\n")) {
			return c
		}
	}
	return ""
}

// triggered applies the trigger label rule to an opened-like or labeled
// action. It returns the ignore decision and false when the action must not
// enqueue.
func (m *Mapper) triggered(d delivery, action, what, state string, labels []labelFields, added *labelFields) (Decision, bool) {
	if state == "closed" {
		return d.ignore("%s is closed", what), false
	}
	trigger := m.cfg.TriggerLabel
	if action == "labeled" {
		switch {
		case trigger == "":
			return d.ignore("labeled is ignored: no trigger label is configured"), false
		case added == nil || !strings.EqualFold(added.Name, trigger):
			name := ""
			if added != nil {
				name = added.Name
			}
			return d.ignore("added label %q is not the trigger label %q", name, trigger), false
		}
		return Decision{}, true
	}
	if trigger != "" && !hasLabel(labels, trigger) {
		return d.ignore("%s does not carry the trigger label %q", what, trigger), false
	}
	return Decision{}, true
}

func hasLabel(labels []labelFields, name string) bool {
	for _, l := range labels {
		if strings.EqualFold(l.Name, name) {
			return true
		}
	}
	return false
}

func labelNames(labels []labelFields) []string {
	var out []string
	for _, l := range labels {
		if n := l.Name; n != "" {
			out = append(out, n)
		}
	}
	return out
}

// requireRepo checks the repository parts every mapping uses.
func requireRepo(event string, repo *repoFields) (*repoFields, error) {
	if repo == nil || repo.ID <= 0 {
		return nil, payloadErrorf(event, "no repository with an id")
	}
	owner, name, ok := strings.Cut(repo.FullName, "/")
	if !ok || owner == "" || name == "" {
		return nil, payloadErrorf(event, "repository full_name %q is not owner/repo", repo.FullName)
	}
	return repo, nil
}

func cancel(d delivery, kind string, repoID int64, number int, reason string) Decision {
	return Decision{Kind: KindCancel, Facts: d.facts, QualifiedID: QualifiedID(kind, repoID, number), CancelReason: reason}
}

// closedBy is the end reason of the items a close event cancels.
func closedBy(d delivery, what string) string {
	if who := dbq.Deref(d.facts.Sender); who != "" {
		return fmt.Sprintf("Cancelled: @%s closed the %s", who, what)
	}
	return "Cancelled: the " + what + " was closed"
}

// enqueueIssue builds the enqueue of an issue; comment is the command that
// asked for it, if any.
func (m *Mapper) enqueueIssue(d delivery, repo *repoFields, issue *issueFields, comment *commentFields) (Decision, error) {
	if repo.DefaultBranch == "" {
		return Decision{}, payloadErrorf(d.event, "repository has no default_branch")
	}
	res := queue.Reservation{
		Repository: repo.FullName,
		BaseRef:    "refs/heads/" + repo.DefaultBranch,
		HeadRef:    "refs/heads/" + m.cfg.BranchPrefix + "issue-" + strconv.Itoa(issue.Number),
	}
	requested := issue.UpdatedAt.Time
	if comment != nil {
		requested = comment.CreatedAt.Time
	}
	return m.enqueue(d, subjectParams{
		kind: KindIssue, repo: repo, number: issue.Number,
		title: issue.Title, body: issue.Body, labels: issue.Labels, htmlURL: issue.HTMLURL,
		res: res, requestedAt: requested, comment: comment,
	})
}

// enqueuePullRequest builds the enqueue of a pull request; comment is the
// command that asked for it, if any.
func (m *Mapper) enqueuePullRequest(d delivery, repo *repoFields, pr *prFields, comment *commentFields) (Decision, error) {
	base, head := pr.Base, pr.Head
	if base.Ref == "" || head.Ref == "" || head.SHA == "" {
		return Decision{}, payloadErrorf(d.event, "pull_request lacks base.ref, head.ref or head.sha")
	}
	headRef := "refs/heads/" + head.Ref
	// A fork's branch is not in this repository; GitHub mirrors its head at
	// refs/pull/<n>/head. A deleted fork arrives with head.repo null.
	inFork := head.Repo == nil || head.Repo.ID != repo.ID
	if inFork {
		headRef = "refs/pull/" + strconv.Itoa(pr.Number) + "/head"
	}
	res := queue.Reservation{Repository: repo.FullName, BaseRef: "refs/heads/" + base.Ref, HeadRef: headRef}
	requested := pr.UpdatedAt.Time
	if comment != nil {
		requested = comment.CreatedAt.Time
	}
	return m.enqueue(d, subjectParams{
		kind: KindPullRequest, repo: repo, number: pr.Number,
		title: pr.Title, body: pr.Body, labels: pr.Labels, htmlURL: pr.HTMLURL, headSHA: head.SHA,
		res: res, requestedAt: requested, comment: comment, headInFork: inFork,
	})
}

type subjectParams struct {
	kind        string
	repo        *repoFields
	number      int
	title, body string
	labels      []labelFields
	htmlURL     string
	headSHA     string
	res         queue.Reservation
	requestedAt time.Time
	comment     *commentFields
	headInFork  bool
}

// enqueue assembles the dispatch, keyed by the delivery ID.
func (m *Mapper) enqueue(d delivery, p subjectParams) (Decision, error) {
	if err := queue.ValidateReservation(p.res); err != nil {
		return Decision{}, payloadErrorf(d.event, "refs make no valid reservation: %v", err)
	}
	meta := Metadata{
		RepositoryID: p.repo.ID,
		Repository:   p.repo.FullName,
		Number:       p.number,
		HTMLURL:      p.htmlURL,
		HeadSHA:      p.headSHA,
		Event:        d.event,
		Action:       d.action(),
		DeliveryID:   d.deliveryID,
		Sender:       dbq.Deref(d.facts.Sender),
		HeadInFork:   p.headInFork,
	}
	if d.facts.InstallationID != nil {
		meta.InstallationID = *d.facts.InstallationID
	}
	if p.comment != nil {
		meta.CommentID = p.comment.ID
	}
	rawMeta, err := json.Marshal(meta)
	if err != nil {
		return Decision{}, fmt.Errorf("encode subject metadata: %w", err)
	}
	// requested_at is when GitHub says the issue, pull request or comment
	// changed, not when the delivery arrived: a redelivery builds the same
	// dispatch.
	requestedAt := m.cfg.Now()
	if !p.requestedAt.IsZero() {
		requestedAt = p.requestedAt
	}
	subject := &queue.SubjectRef{
		Kind:        p.kind,
		ID:          nativeID(p.repo.ID, p.number),
		Title:       p.title,
		Description: p.body,
		Labels:      labelNames(p.labels),
		Metadata:    rawMeta,
	}
	res := p.res
	return Decision{
		Kind:        KindEnqueue,
		Facts:       d.facts,
		QualifiedID: QualifiedID(p.kind, p.repo.ID, p.number),
		Enqueue: queue.EnqueueParams{
			IdempotencyKey: d.deliveryID,
			Reservation:    &res,
			Dispatch: queue.SubjectDispatch{
				Subject:       subject,
				WorkflowRef:   WorkflowCoding,
				TriggerSource: "github:" + d.event + "." + d.action(),
				RequestedAt:   queue.Timestamp{Time: requestedAt.UTC()},
			},
		},
	}, nil
}
