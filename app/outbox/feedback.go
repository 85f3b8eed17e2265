package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// DeliveryFeedback writes what a delivery's outcome means on GitHub, in the
// delivery's transaction (webhook.HandlerConfig.OnOutcome): a notice on the
// item's check run for a replay; a warning on the live holder's check run for
// a collision, plus a concluded check run on the colliding pull request's
// head commit (neutral for a subject collision on another commit,
// action_required for a reservation collision) naming the holder.
//
// An installation deleted or suspended, or repositories removed from it,
// stops the installation's (those repositories') pending outbox rows
// instead: they are marked failed with the reason.
func (o *Outbox) DeliveryFeedback(ctx context.Context, tx pgx.Tx, r webhook.Result) error {
	if r.Decision.Kind == webhook.KindCancelInstallation && r.Decision.Installation != nil &&
		r.Outcome != webhook.OutcomeReplay && r.Outcome != webhook.OutcomeIdempotencyConflict {
		return o.stopInstallation(ctx, tx, *r.Decision.Installation)
	}
	if r.EntryID == "" {
		return nil
	}
	switch r.Outcome {
	case webhook.OutcomeReplay, webhook.OutcomeSubjectCollision, webhook.OutcomeReservationCollision:
	default:
		return nil
	}
	id, err := uuid.Parse(r.EntryID)
	if err != nil {
		return nil
	}
	holder, err := queue.ReadItem(ctx, tx, id)
	if err != nil {
		return fmt.Errorf("read the delivery's item: %w", err)
	}
	hm, ok := itemMeta(holder) // the holder's dispatch, parsed once
	if !ok {
		return nil // the holder is a queue item only: nothing of it goes to GitHub
	}
	held, err := itemState(ctx, o.q, tx, holder.ID())
	if err != nil {
		return err
	}
	gen, qid, status, res := holder.Generation(), holder.QualifiedID(), holder.Status(), holder.Reservation()
	details := map[string]any{
		"delivery_id": r.DeliveryID, "event": r.Event, "action": dbq.Deref(r.Decision.Facts.Action),
		"qualified_id": qid, "generation": gen, "entry_id": r.EntryID, "status": status,
	}
	if res != nil {
		details["repository"] = res.Repository
		details["base_ref"] = res.BaseRef
		details["head_ref"] = res.HeadRef
	}
	if url := pullRequestOf(hm, held); url != "" {
		details["pull_request"] = url
	}
	raw, _ := json.Marshal(details)

	var headRef string
	if res != nil {
		headRef = res.HeadRef
	}
	var ann Annotation
	switch r.Outcome {
	case webhook.OutcomeReplay:
		ann = Annotation{Level: "notice", Title: "Delivery replayed",
			Message: fmt.Sprintf("GitHub delivered %s again. It replayed generation %d of %s (entry %s): nothing new was queued.", r.DeliveryID, gen, qid, r.EntryID)}
	case webhook.OutcomeSubjectCollision:
		ann = Annotation{Level: "warning", Title: "Subject already has live work",
			Message: fmt.Sprintf("Delivery %s (%s) was not queued: generation %d of %s is still %s (entry %s). It runs to the end first.", r.DeliveryID, eventAction(r), gen, qid, status, r.EntryID)}
	case webhook.OutcomeReservationCollision:
		ann = Annotation{Level: "warning", Title: "Branch reserved by this work",
			Message: fmt.Sprintf("Delivery %s (%s) for %s wanted %s, which generation %d of %s holds (entry %s).", r.DeliveryID, eventAction(r), r.Decision.QualifiedID, headRef, gen, qid, r.EntryID)}
	}
	ann.RawDetails = raw
	if err := o.checkRunByID(ctx, tx, holder.ID(), r.TraceParent, checkRunUpdate{Annotations: []Annotation{ann}}); err != nil {
		return err
	}

	// A pull request event on a commit that is not the holder's gets a check
	// run of its own, so its author sees why nothing runs there.
	event, ok := eventMeta(r)
	holderSHA := dbq.Deref(held.HeadSha)
	if holderSHA == "" {
		holderSHA = hm.HeadSHA
	}
	if !ok || event.HeadSHA == "" || event.HeadSHA == holderSHA {
		return nil
	}
	sc := standaloneCheckRun{
		InstallationID: event.InstallationID, Repository: event.Repository, HeadSHA: event.HeadSHA,
		ExternalID: "delivery:" + r.DeliveryID,
	}
	where := fmt.Sprintf("generation %d of %s (entry %s, %s)", gen, qid, r.EntryID, status)
	if res != nil {
		where += fmt.Sprintf(", reserving %s %s → %s", res.Repository, res.BaseRef, res.HeadRef)
	}
	if url := pullRequestOf(hm, held); url != "" {
		where += ", pull request " + url
	}
	if r.Outcome == webhook.OutcomeReservationCollision {
		sc.Conclusion, sc.Title = "action_required", "Branch held by other work"
		sc.Summary = fmt.Sprintf("gitlease did not queue this pull request: its head branch is reserved by %s. "+
			"Push to another branch, or wait until that work finishes.", where)
	} else {
		sc.Conclusion, sc.Title = "neutral", fmt.Sprintf("Generation %d is live", gen)
		sc.Summary = fmt.Sprintf("gitlease did not queue this commit: %s is still running for this pull request. "+
			"It runs to the end first; push again after it finishes to queue the next generation.", where)
	}
	return o.standalone(ctx, tx, r.TraceParent, sc)
}

func eventAction(r webhook.Result) string {
	if a := dbq.Deref(r.Decision.Facts.Action); a != "" {
		return r.Event + "." + a
	}
	return r.Event
}

// eventMeta reads the GitHub location of the event's own subject, from the
// Decision's values (its metadata only, not the description).
func eventMeta(r webhook.Result) (webhook.ItemMeta, bool) {
	return webhook.SubjectMeta(r.Decision.Enqueue.Dispatch.Subject)
}

// pullRequestOf is the holder's pull request: the one gitlease opened for
// an issue item, or the pull request a PR item is about (hm: the holder's
// GitHub metadata, which rowMeta found valid).
func pullRequestOf(hm webhook.ItemMeta, g dbq.GithubItem) string {
	if g.PrUrl != nil {
		return *g.PrUrl
	}
	if hm.Kind == webhook.KindPullRequest {
		return hm.HTMLURL
	}
	return ""
}

func (o *Outbox) checkRunByID(ctx context.Context, tx pgx.Tx, id uuid.UUID, traceParent string, u checkRunUpdate) error {
	return o.insert(ctx, tx, "checks/"+id.String(), kindCheckRun, &id, traceParent, u)
}

// stopInstallation marks the pending outbox rows of an installation (or of
// its removed repositories) failed with the scope's reason.
func (o *Outbox) stopInstallation(ctx context.Context, tx pgx.Tx, sc webhook.InstallationScope) error {
	ids := make([]string, 0, len(sc.RepositoryIDs)) // never nil: NULL would match nothing
	for _, id := range sc.RepositoryIDs {
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	names := make([]string, 0, len(sc.Repositories))
	for _, n := range sc.Repositories {
		names = append(names, strings.ToLower(n))
	}
	n, err := o.q.OutboxFailInstallation(ctx, tx, dbq.OutboxFailInstallationParams{
		Now: o.now(), Reason: "not sent: " + sc.Reason, InstallationID: strconv.FormatInt(sc.InstallationID, 10),
		RepositoryIds: ids, RepositoryNames: names,
	})
	if err != nil {
		return fmt.Errorf("stop the outbox rows of installation %d: %w", sc.InstallationID, err)
	}
	o.logger.InfoContext(ctx, "outbox rows stopped", "installation_id", sc.InstallationID, "rows", n, "reason", sc.Reason)
	return nil
}
