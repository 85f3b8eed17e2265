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

// CancelAction is the identifier of the Cancel button on every live
// item's check run (a check run action, SPEC §8.3).
const CancelAction = "cancel"

// CheckRunCancel is a press of the Cancel button on a check run this App
// created: EntryID is its external_id, CheckRunID its id.
type CheckRunCancel struct {
	EntryID      string
	CheckRunID   int64
	RepositoryID int64
}

// requestedAction maps check_run requested_action: the Cancel button of
// this App's check run cancels the entry it names (the handler checks the
// rest in the delivery's transaction); any other button, or another App's
// check run, is ignored.
func (m *Mapper) requestedAction(d delivery, payload []byte) (Decision, error) {
	if m.cfg.AppID == 0 {
		return d.ignore("the App's ID is not configured: its own check runs cannot be told apart"), nil
	}
	var p checkPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return Decision{}, payloadErrorf(d.event, "does not parse: %v", err)
	}
	part, repoID, err := p.part(d.event)
	if err != nil {
		return Decision{}, err
	}
	if part.App == nil || part.App.ID != m.cfg.AppID {
		return d.ignore("a check_run requested_action of another App"), nil
	}
	if p.RequestedAction == nil || p.RequestedAction.Identifier != CancelAction {
		id := ""
		if p.RequestedAction != nil {
			id = p.RequestedAction.Identifier
		}
		return d.ignore("requested action %q is not %q", id, CancelAction), nil
	}
	if _, err := uuid.Parse(part.ExternalID); err != nil || part.ID <= 0 {
		return d.ignore("check run external_id %q is no gitlease entry", part.ExternalID), nil
	}
	return Decision{
		Kind: KindCancel, Facts: d.facts,
		CheckRun:     &CheckRunCancel{EntryID: part.ExternalID, CheckRunID: part.ID, RepositoryID: repoID},
		CancelReason: fmt.Sprintf("Cancelled by @%s with the Cancel button", dbq.Deref(d.facts.Sender)),
	}, nil
}

// cancelCheckRun cancels the entry of a Cancel button press, in the
// delivery's transaction, when the check run is the one gitlease recorded
// for a live entry that came from a verified delivery of this installation
// and repository. why says, when it is ignored, why.
func (h *Handler) cancelCheckRun(ctx context.Context, tx pgx.Tx, d Decision) (cr queue.CancelResult, why string, err error) {
	c := d.CheckRun
	if h.cfg.CheckSuites == nil {
		return cr, "check runs cannot be looked up without GitHub App credentials", nil
	}
	id, err := uuid.Parse(c.EntryID)
	if err != nil {
		return cr, fmt.Sprintf("check run external_id %q is no gitlease entry", c.EntryID), nil
	}
	it, err := h.store.Get(ctx, c.EntryID)
	if errors.Is(err, queue.ErrNotFound) {
		return cr, fmt.Sprintf("entry %s is not known", c.EntryID), nil
	}
	if err != nil {
		return cr, "", fmt.Errorf("read the cancelled entry: %w", err)
	}
	meta, ok := ReadMeta(it.Dispatch())
	if !ok || !it.FromGitHub() || meta.RepositoryID != c.RepositoryID ||
		d.Facts.InstallationID == nil || meta.InstallationID != *d.Facts.InstallationID {
		return cr, fmt.Sprintf("entry %s is no GitHub item of this installation and repository", c.EntryID), nil
	}
	recorded, err := h.cfg.CheckSuites.CheckRunOf(ctx, tx, c.EntryID)
	if err != nil {
		return cr, "", fmt.Errorf("read the entry's check run: %w", err)
	}
	if recorded != c.CheckRunID {
		return cr, fmt.Sprintf("check run %d is not the one gitlease recorded for entry %s", c.CheckRunID, c.EntryID), nil
	}
	if cr, err = h.store.CancelEntryTx(ctx, tx, id, d.CancelReason); err != nil {
		return cr, "", err
	}
	if !cr.Any() {
		return cr, fmt.Sprintf("entry %s is %s: nothing live to cancel", c.EntryID, it.Status()), nil
	}
	return cr, "", nil
}
