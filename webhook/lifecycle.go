package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/queue"
)

// KindCancelInstallation: cancel the live items of Decision.Installation
// and stop its outbox rows (an installation deleted or suspended, or
// repositories removed from it).
const KindCancelInstallation Kind = 100

// InstallationScope is what an installation event takes away: the whole
// installation (RepositoryIDs empty) or those repositories of it.
type InstallationScope struct {
	InstallationID int64
	RepositoryIDs  []int64
	// Repositories are the removed repositories' full names (owner/repo).
	Repositories []string
	// Reason is recorded on the stopped outbox rows and in the answer.
	Reason string
}

// installationPayload is the part of installation and
// installation_repositories payloads gitlease reads; every other field may
// be anything.
type installationPayload struct {
	Installation *struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	RepositoriesRemoved []struct {
		ID       int64  `json:"id"`
		FullName string `json:"full_name"`
	} `json:"repositories_removed"`
}

// parseInstallationPayload reads an installation or
// installation_repositories payload. It returns a *PayloadError when the
// fields gitlease reads are missing or of the wrong type.
func parseInstallationPayload(event string, payload []byte) (installationPayload, error) {
	var p installationPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return p, payloadErrorf(event, "does not parse: %v", err)
	}
	if p.Installation == nil || p.Installation.ID <= 0 {
		return p, payloadErrorf(event, "no installation with an id")
	}
	return p, nil
}

// lifecycle maps installation and installation_repositories events (docs/webhook.md):
// deleted and suspend cancel the installation's live items and stop
// its outbox rows; installation_repositories removed does the same for
// those repositories; unsuspend and every other action change nothing (a
// suspended installation sends gitlease no events, so new work comes in
// again with its next delivery). Only the fields used are parsed.
func (m *Mapper) lifecycle(d delivery, payload []byte) (Decision, error) {
	p, err := parseInstallationPayload(d.event, payload)
	if err != nil {
		return Decision{}, err
	}
	id, action := p.Installation.ID, d.action()
	switch {
	case d.event == "installation" && (action == "deleted" || action == "suspend"):
		return Decision{Kind: KindCancelInstallation, Facts: d.facts, Installation: &InstallationScope{
			InstallationID: id, RepositoryIDs: []int64{},
			Reason: fmt.Sprintf("GitHub App installation %d was %s", id, map[string]string{"deleted": "deleted", "suspend": "suspended"}[action]),
		}}, nil
	case d.event == "installation" && action == "unsuspend":
		return d.ignore("installation %d unsuspended: new work comes in again", id), nil
	case d.event == "installation_repositories" && action == "removed":
		scope := &InstallationScope{InstallationID: id, RepositoryIDs: []int64{}}
		for _, r := range p.RepositoriesRemoved {
			if r.ID > 0 {
				scope.RepositoryIDs = append(scope.RepositoryIDs, r.ID)
				scope.Repositories = append(scope.Repositories, r.FullName)
			}
		}
		if len(scope.RepositoryIDs) == 0 {
			return d.ignore("installation_repositories removed names no repository"), nil
		}
		scope.Reason = fmt.Sprintf("repositories %v were removed from GitHub App installation %d", scope.Repositories, id)
		return Decision{Kind: KindCancelInstallation, Facts: d.facts, Installation: scope}, nil
	}
	return d.ignore("%s action %q is not handled", d.event, action), nil
}

// cancelInstallation cancels the live items of an installation (or of its
// removed repositories): cancelled when any was, else ignored. Its outbox
// rows are stopped by HandlerConfig.OnOutcome, which sees the decision.
func (h *Handler) cancelInstallation(ctx context.Context, tx pgx.Tx, res Result) (Result, Outcome, error) {
	sc := res.Decision.Installation
	cr, err := h.store.CancelInstallationTx(ctx, tx, sc.InstallationID, sc.RepositoryIDs, "Cancelled: "+sc.Reason)
	if err != nil {
		return res, "", err
	}
	if !cr.Any() {
		res.Outcome, res.Reason = OutcomeIgnored, sc.Reason+": nothing live to cancel"
		return res, res.Outcome, nil
	}
	touched := append(append([]queue.Item{}, cr.Cancelled...), cr.Requested...)
	res.Outcome = OutcomeCancelled
	nameItem(&res.Response, touched[0].EntryID(), touched[0].QualifiedID(), ptrGen(touched[0].Generation()))
	res.Reason = fmt.Sprintf("%s: %d pending or held item(s) cancelled, %d assigned item(s) asked to stop", sc.Reason, len(cr.Cancelled), len(cr.Requested))
	return res, res.Outcome, nil
}
