package ui

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/queue"
)

// actor is how the audit log names who acted from the dashboard.
func actor(s session) string { return "dashboard " + s.Kind + " session" }

var itemActions = []string{queue.ActionHold, queue.ActionRelease, queue.ActionDrop, queue.ActionReclaim, queue.ActionCancel}

// confirmation is what the confirmation page of an action that cannot be
// undone says.
type confirmation struct {
	EntryID, Action, Question, Text, Button string
}

var confirmations = map[string]confirmation{
	queue.ActionDrop: {Action: queue.ActionDrop, Question: "Drop this item?", Button: "Drop it",
		Text: "Dropping finishes it with outcome dropped. This cannot be undone: a new delivery for its subject makes a new generation."},
	queue.ActionCancel: {Action: queue.ActionCancel, Question: "Cancel this item?", Button: "Cancel it",
		Text: "Cancelling it does what its check run's Cancel button does: pending or held, it finishes cancelled at once; " +
			"assigned, its worker is told to stop (serve's built-in worker stops the command within seconds, an outside worker at its next renew) " +
			"and it finishes cancelled. This cannot be undone."},
}

// act runs an operator action on an item. A drop or a cancel cannot be
// undone, so without confirm=yes it only shows the confirmation page.
func (u *UI) act(c echo.Context) error {
	id, action := c.Param("id"), c.Param("action")
	if !slices.Contains(itemActions, action) {
		return u.fail(c, http.StatusNotFound, "There is no such action.")
	}
	if conf, ok := confirmations[action]; ok && c.FormValue("confirm") != "yes" {
		conf.EntryID = id
		return u.render(c, http.StatusOK, "confirm", page{Title: conf.Question, Nav: "items", Data: conf})
	}
	err := u.store.Act(c.Request().Context(), queue.ActParams{EntryID: id, Action: action, Actor: actor(sess(c))})
	var na *queue.NotActionableError
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return u.fail(c, http.StatusNotFound, "There is no item with that entry ID.")
	case errors.As(err, &na):
		return u.fail(c, http.StatusConflict, "Nothing changed: "+na.Error()+".")
	case err != nil:
		return u.failErr(c, "acting on the item", err)
	}
	u.logger.InfoContext(c.Request().Context(), "dashboard action", "action", action, "entry_id", id, "session_kind", sess(c).Kind)
	return c.Redirect(http.StatusSeeOther, "/ui/items/"+id+"?done="+action)
}

// retry sends a failed GitHub write again, noting it in its item's audit
// log in the same transaction.
func (u *UI) retry(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		return u.fail(c, http.StatusNotFound, "There is no such GitHub write.")
	}
	var entry string
	err = u.store.InTx(c.Request().Context(), func(ctx context.Context, tx pgx.Tx) error {
		e, err := u.outbox.RetryTx(ctx, tx, id)
		if err != nil || e == nil {
			return err
		}
		entry = e.String()
		return u.store.AuditTx(ctx, tx, *e, "operator/retry_github_write", actor(sess(c))+": outbox "+c.Param("id"))
	})
	switch {
	case errors.Is(err, outbox.ErrNotFailed):
		return u.fail(c, http.StatusConflict, "Nothing changed: that GitHub write has not failed (it is pending or done, or does not exist).")
	case err != nil:
		return u.failErr(c, "retrying the GitHub write", err)
	}
	u.logger.InfoContext(c.Request().Context(), "dashboard action", "action", "retry", "outbox_id", id, "session_kind", sess(c).Kind)
	if entry != "" && c.FormValue("back") == "item" {
		return c.Redirect(http.StatusSeeOther, "/ui/items/"+entry+"?done=retry")
	}
	return c.Redirect(http.StatusSeeOther, "/ui/outbox?done=retry")
}

// scan asks the reconciler to look for missed deliveries now.
func (u *UI) scan(c echo.Context) error {
	if u.cfg.Reconciler == nil {
		return u.fail(c, http.StatusConflict, "The redelivery reconciler is not configured on this server.")
	}
	if err := u.cfg.Reconciler.ScanNow(c.Request().Context()); err != nil {
		return u.failErr(c, "scanning for missed deliveries", err)
	}
	u.logger.InfoContext(c.Request().Context(), "dashboard action", "action", "scan", "session_kind", sess(c).Kind)
	return c.Redirect(http.StatusSeeOther, "/ui/?done=scan")
}
