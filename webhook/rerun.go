package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

// KindRerun: GitHub's Re-run of a gitlease check run or check suite;
// Decision.Rerun says which. The handler turns it into an enqueue of the
// entry's subject.
const KindRerun Kind = 101

// RerunRequest is a Re-run of a check run this App created (EntryID is its
// external_id) or of this App's check suite on HeadSHA (EntryID empty:
// the handler finds the entry through HandlerConfig.CheckSuites).
type RerunRequest struct {
	EntryID string
	// CheckRunID is the Re-run check run's id (0 for a check suite): it
	// must be the one gitlease recorded for the entry.
	CheckRunID   int64
	RepositoryID int64
	// HeadSHA is the commit the check run or suite is on.
	HeadSHA string
	// PullRequestHeads are the current head SHAs of the pull requests the
	// payload names, by number.
	PullRequestHeads map[int]string
}

// CheckSuiteLookup finds the entry whose check run sits in this App's
// check suite on a commit, and an entry's check run (gitlease's GitHub
// side records its check runs).
type CheckSuiteLookup interface {
	// EntryOnCommit returns the newest entry of repositoryID with a check
	// run on headSHA, "" when there is none.
	EntryOnCommit(ctx context.Context, tx pgx.Tx, repositoryID int64, headSHA string) (string, error)
	// CheckRunOf returns the id of the check run recorded for entryID, 0
	// when there is none.
	CheckRunOf(ctx context.Context, tx pgx.Tx, entryID string) (int64, error)
}

// checkPayload is the part of check_run and check_suite payloads gitlease
// reads; every other field (timestamps included) may be anything.
type checkPayload struct {
	CheckRun        *checkPart `json:"check_run"`
	CheckSuite      *checkPart `json:"check_suite"`
	RequestedAction *struct {
		Identifier string `json:"identifier"`
	} `json:"requested_action"`
	Repository *struct {
		ID int64 `json:"id"`
	} `json:"repository"`
}

type checkPart struct {
	ID         int64  `json:"id"`
	ExternalID string `json:"external_id"`
	HeadSHA    string `json:"head_sha"`
	App        *struct {
		ID int64 `json:"id"`
	} `json:"app"`
	PullRequests []struct {
		Number int `json:"number"`
		Head   struct {
			SHA string `json:"sha"`
		} `json:"head"`
	} `json:"pull_requests"`
}

// parseCheckPayload reads a check_run or check_suite payload. It returns a
// *PayloadError when the parts gitlease reads are missing or mistyped.
func parseCheckPayload(event string, payload []byte) (*checkPart, int64, error) {
	var p checkPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, 0, payloadErrorf(event, "does not parse: %v", err)
	}
	return p.part(event)
}

// part is the check run or suite of the payload and its repository ID.
func (p *checkPayload) part(event string) (*checkPart, int64, error) {
	part := p.CheckRun
	if event == "check_suite" {
		part = p.CheckSuite
	}
	if part == nil {
		return nil, 0, payloadErrorf(event, "no %s", event)
	}
	if p.Repository == nil || p.Repository.ID <= 0 {
		return nil, 0, payloadErrorf(event, "no repository with an id")
	}
	return part, p.Repository.ID, nil
}

// rerun maps check_run and check_suite events (docs/webhook.md): rerequested of
// this App's check run (an entry ID as external_id) or check suite asks
// for a new generation of that entry's subject; anything else is ignored.
func (m *Mapper) rerun(d delivery, payload []byte) (Decision, error) {
	if d.event == "check_run" && d.action() == "requested_action" {
		return m.requestedAction(d, payload)
	}
	if d.action() != "rerequested" {
		return d.ignore("%s action %q is not handled", d.event, d.action()), nil
	}
	if m.cfg.AppID == 0 {
		// Not acted on, so answered from the envelope alone.
		return d.ignore("the App's ID is not configured: its own check runs cannot be told apart"), nil
	}
	part, repoID, err := parseCheckPayload(d.event, payload)
	if err != nil {
		return Decision{}, err
	}
	if part.App == nil || part.App.ID != m.cfg.AppID {
		return d.ignore("a %s of another App", d.event), nil
	}
	rr := &RerunRequest{RepositoryID: repoID, HeadSHA: part.HeadSHA, PullRequestHeads: map[int]string{}}
	for _, pr := range part.PullRequests {
		if pr.Number > 0 && pr.Head.SHA != "" {
			rr.PullRequestHeads[pr.Number] = pr.Head.SHA
		}
	}
	if d.event == "check_run" {
		if _, err := uuid.Parse(part.ExternalID); err != nil {
			return d.ignore("check run external_id %q is no gitlease entry", part.ExternalID), nil
		}
		rr.EntryID, rr.CheckRunID = part.ExternalID, part.ID
	} else if rr.HeadSHA == "" {
		return Decision{}, payloadErrorf(d.event, "check_suite has no head_sha")
	}
	return Decision{Kind: KindRerun, Facts: d.facts, Rerun: rr}, nil
}

// rerunEnqueue turns a Re-run into the enqueue of a new generation of the
// entry's subject, keyed by the delivery ID, with the entry's reservation
// (a pull request's on its current head). It returns the ignore decision
// when the entry is unknown or not of this repository.
func (h *Handler) rerunEnqueue(ctx context.Context, tx pgx.Tx, d Decision, deliveryID, event string) (Decision, error) {
	rr := d.Rerun
	ign := delivery{event: event, deliveryID: deliveryID, facts: d.Facts}
	entryID := rr.EntryID
	if entryID == "" {
		if h.cfg.CheckSuites == nil {
			return ign.ignore("check suites cannot be looked up without GitHub App credentials"), nil
		}
		var err error
		if entryID, err = h.cfg.CheckSuites.EntryOnCommit(ctx, tx, rr.RepositoryID, rr.HeadSHA); err != nil {
			return Decision{}, fmt.Errorf("find the check suite's entry: %w", err)
		}
		if entryID == "" {
			return ign.ignore("the check suite on %s holds no gitlease check run", rr.HeadSHA), nil
		}
	}
	it, err := h.store.Get(ctx, entryID)
	if errors.Is(err, queue.ErrNotFound) {
		return ign.ignore("entry %s is not known", entryID), nil
	}
	if err != nil {
		return Decision{}, fmt.Errorf("read the re-run entry: %w", err)
	}
	meta, ok := ReadMeta(it.Dispatch())
	res := it.Reservation()
	switch {
	case !it.FromGitHub():
		// Enqueued over /rpc or stdio: whatever its dispatch names, it
		// has no GitHub side to run again (SPEC §6).
		return ign.ignore("entry %s was not enqueued from a GitHub delivery", entryID), nil
	case !ok || meta.RepositoryID != rr.RepositoryID || res == nil:
		return ign.ignore("entry %s is no GitHub item of this repository", entryID), nil
	case d.Facts.InstallationID == nil || meta.InstallationID != *d.Facts.InstallationID:
		return ign.ignore("entry %s belongs to another installation", entryID), nil
	}
	if rr.EntryID != "" {
		if h.cfg.CheckSuites == nil {
			return ign.ignore("check runs cannot be looked up without GitHub App credentials"), nil
		}
		recorded, err := h.cfg.CheckSuites.CheckRunOf(ctx, tx, entryID)
		if err != nil {
			return Decision{}, fmt.Errorf("read the re-run entry's check run: %w", err)
		}
		if recorded == 0 || recorded != rr.CheckRunID {
			return ign.ignore("check run %d is not the one gitlease recorded for entry %s", rr.CheckRunID, entryID), nil
		}
	}
	var dispatch queue.SubjectDispatch
	if err := json.Unmarshal(it.Dispatch(), &dispatch); err != nil || dispatch.Subject == nil {
		return ign.ignore("entry %s has no subject to run again", entryID), nil
	}
	var md map[string]any
	if err := json.Unmarshal(dispatch.Subject.Metadata, &md); err != nil {
		return ign.ignore("entry %s has no subject metadata", entryID), nil
	}
	md["event"], md["action"], md["delivery_id"], md["sender"] = event, "rerequested", deliveryID, dbq.Deref(d.Facts.Sender)
	if meta.Kind == KindPullRequest {
		head := rr.PullRequestHeads[meta.Number]
		if head == "" {
			head = rr.HeadSHA // the commit the check ran on
		}
		if head != "" {
			md["head_sha"] = head
		}
	}
	subject := *dispatch.Subject
	if subject.Metadata, err = json.Marshal(md); err != nil {
		return Decision{}, fmt.Errorf("encode subject metadata: %w", err)
	}
	dispatch.Subject = &subject
	dispatch.TriggerSource = "github:" + event + ".rerequested"
	dispatch.RequestedAt = queue.Timestamp{Time: h.cfg.Now().UTC()}
	reservation := *res
	return Decision{
		Kind: KindEnqueue, Facts: d.Facts, QualifiedID: it.QualifiedID(),
		Enqueue: queue.EnqueueParams{IdempotencyKey: deliveryID, Reservation: &reservation, Dispatch: dispatch},
	}, nil
}
