package ui

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

func (u *UI) loginPage(c echo.Context) error {
	if _, ok, _ := u.sessionOf(c); ok {
		return c.Redirect(http.StatusSeeOther, "/ui/")
	}
	return u.render(c, http.StatusOK, "login", page{Title: "Sign in", Data: ""})
}

// login signs in with the admin or the view token, compared in constant
// time. A client (by its address) whose sign-ins failed LoginFailures
// times within LoginWindow is answered 429 for LoginBlock, whatever it
// sends, with the count and the block kept in PostgreSQL, so that every
// instance refuses it.
func (u *UI) login(c echo.Context) error {
	ctx := c.Request().Context()
	client, now := clientAddr(c.Request()), u.cfg.Now()
	blocked, err := u.q.UILoginBlockedUntil(ctx, u.pool, dbq.UILoginBlockedUntilParams{Client: client, Now: now})
	switch {
	case err == nil:
		return u.tooManyLogins(c, blocked.Sub(now))
	case !errors.Is(err, pgx.ErrNoRows):
		return u.failErr(c, "signing in", err)
	}
	token := []byte(c.FormValue("token"))
	admin := subtle.ConstantTimeCompare(token, []byte(u.cfg.AdminToken)) == 1
	view := u.cfg.ViewToken != "" && subtle.ConstantTimeCompare(token, []byte(u.cfg.ViewToken)) == 1
	kind := ""
	switch {
	case len(token) == 0:
	case admin:
		kind = KindAdmin
	case view:
		kind = KindView
	}
	if kind == "" {
		if _, err := u.q.UILoginFailed(ctx, u.pool, dbq.UILoginFailedParams{Client: client, Now: now,
			LimitCount: int32(u.cfg.LoginFailures), BlockUntil: now.Add(u.cfg.LoginBlock), WindowSince: now.Add(-u.cfg.LoginWindow)}); err != nil {
			return u.failErr(c, "signing in", err)
		}
		u.logger.InfoContext(ctx, "dashboard sign-in failed", "client", client)
		return u.render(c, http.StatusUnauthorized, "login", page{Title: "Sign in", Data: "That token is not the dashboard's admin or view token."})
	}
	s, err := newSession(kind, now, u.cfg.SessionTTL)
	if err != nil {
		return u.failErr(c, "signing in", err)
	}
	c.SetCookie(u.cookie(c, s.encode(u.key), s.Expires))
	u.logger.InfoContext(ctx, "dashboard sign-in", "session_kind", kind)
	return c.Redirect(http.StatusSeeOther, "/ui/")
}

// tooManyLogins answers a blocked client's sign-in 429, saying when to try
// again.
func (u *UI) tooManyLogins(c echo.Context, wait time.Duration) error {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return u.render(c, http.StatusTooManyRequests, "login", page{Title: "Sign in",
		Data: fmt.Sprintf("Too many failed sign-ins from this address: try again in %d seconds.", secs)})
}

// clientAddr is who a sign-in comes from, for counting its failures: the
// connection's peer address, or, when that peer is a proxy on a private,
// loopback or link-local address, the nearest address before it in
// X-Forwarded-For that is not (so a client cannot pick its own address
// by sending the header).
func clientAddr(r *http.Request) string {
	return echo.ExtractIPFromXFFHeader()(r)
}

// logout ends the session on the server: its nonce is recorded as signed
// out (until the cookie would expire) where every instance checks it, so
// the cookie no longer works even if it was kept; then the cookie is
// cleared.
func (u *UI) logout(c echo.Context) error {
	s := sess(c)
	if err := u.q.UISignOut(c.Request().Context(), u.pool, dbq.UISignOutParams{Nonce: s.Nonce, ExpiresAt: s.Expires}); err != nil {
		return u.failErr(c, "signing out", err)
	}
	c.SetCookie(u.cookie(c, "", time.Unix(0, 0)))
	u.logger.InfoContext(c.Request().Context(), "dashboard sign-out", "session_kind", s.Kind)
	return c.Redirect(http.StatusSeeOther, "/ui/login")
}

// cookie is the session cookie: HttpOnly, SameSite=Strict, scoped to /ui,
// Secure when the request came over TLS or through an HTTPS proxy.
func (u *UI) cookie(c echo.Context, value string, expires time.Time) *http.Cookie {
	r := c.Request()
	return &http.Cookie{
		Name: Cookie, Value: value, Path: "/ui", Expires: expires, MaxAge: max(int(expires.Sub(u.cfg.Now()).Seconds()), -1),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
	}
}

// overviewData is the overview page.
type overviewData struct {
	Live, All     map[string]int64
	Counts        map[string]int64 // live ones from Live, finished ones from All
	Statuses      []string
	CountsAt      time.Time
	Deliveries    map[string]int64
	Outcomes      []string
	Outbox        map[string]int64
	OldestPending *time.Time
	Owners        []dbq.UIWorkItemLeaseOwnersRow
	Installations []installationView
	Cap           int // most assigned per installation; 0: no cap
	Reconciler    *ReconcileStatus
	ReconcileErr  string
	Database      db.Server // the server the dashboard's connection is on
}

// installationView is one installation's row of the overview.
type installationView struct {
	ID                int64 // 0: items over /rpc and stdio
	Pending, Assigned int64
	Cap               int  // 0: none (always for /rpc and stdio)
	AtCap             bool // Assigned has reached Cap
	PausedUntil       *time.Time
	Reason            string // of the pause: GitHub's primary or secondary limit, or content pacing
	Remaining, Limit  string // as GitHub's headers last said; "" unknown
	Reset             *time.Time
}

// viewInstallations joins the queue's per-installation loads and the
// recorded budgets, by installation ID.
func viewInstallations(loads []queue.InstallationLoad, budgets []github.Budget, limit int) []installationView {
	byID := map[int64]*installationView{}
	var ids []int64
	row := func(id int64) *installationView {
		if v := byID[id]; v != nil {
			return v
		}
		v := &installationView{ID: id}
		if id != 0 {
			v.Cap = limit
		}
		byID[id] = v
		ids = append(ids, id)
		return v
	}
	for _, l := range loads {
		v := row(l.InstallationID)
		v.Pending, v.Assigned, v.PausedUntil = l.Pending, l.Assigned, l.PausedUntil
		v.AtCap = v.Cap > 0 && v.Assigned >= int64(v.Cap)
	}
	for _, b := range budgets {
		v := row(b.InstallationID)
		if b.Remaining != nil {
			v.Remaining = strconv.Itoa(*b.Remaining)
		}
		if b.Limit != nil {
			v.Limit = strconv.Itoa(*b.Limit)
		}
		v.Reset, v.Reason = b.Reset, b.Reason
	}
	slices.Sort(ids)
	out := make([]installationView, len(ids))
	for i, id := range ids {
		out[i] = *byID[id]
	}
	return out
}

func (u *UI) overview(c echo.Context) error {
	ctx := c.Request().Context()
	o, err := u.readOverview(ctx)
	if err != nil {
		return u.failErr(c, "reading the overview", err)
	}
	if u.cfg.Reconciler != nil {
		st, err := u.cfg.Reconciler.Status(ctx)
		if err != nil {
			o.ReconcileErr = "the reconciler's state could not be read"
			u.logger.WarnContext(ctx, "dashboard: reconciler status", "err", err)
		} else {
			o.Reconciler = &st
		}
	}
	return u.render(c, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Refresh: u.refresh(), Data: o})
}

func (u *UI) refresh() int { return int(u.cfg.Refresh / time.Millisecond) }

// itemRow is one item as the lists show it.
type itemRow struct {
	EntryID, QualifiedID, Status, Kind string
	Generation                         int64
	Subject, SubjectURL                string
	Reservation                        string
	LeaseOwner                         string
	LeaseExpires                       *time.Time
	LeaseExpired                       bool
	EnqueuedAt                         time.Time
	AssignedAt, HeldAt, FinishedAt     *time.Time
	PRNumber                           int32
	PRURL, CheckRunURL                 string
}

// rowOf builds a list row from an item and what GitHub holds for it.
func rowOf(w listedItem, prNumber *int32, prURL *string, checkRunID *int64, web string, now time.Time) itemRow {
	r := itemRow{EntryID: w.ID.String(), QualifiedID: dbq.Deref(w.CanonicalID), Status: w.Status,
		Generation: dbq.Deref(w.SubjectGeneration), EnqueuedAt: w.EnqueuedAt, AssignedAt: w.AssignedAt,
		HeldAt: w.HeldAt, FinishedAt: w.FinishedAt, LeaseOwner: dbq.Deref(w.LeaseOwner)}
	r.Kind, _, _ = queue.SplitQualifiedID(r.QualifiedID)
	if r.QualifiedID == "" {
		r.Subject = w.SubjectID
	}
	if m, ok := webhook.ReadMeta(w.Dispatch); ok {
		r.Subject = m.Repository + "#" + itoa(m.Number)
		r.SubjectURL = safeURL(m.HTMLURL)
		if checkRunID != nil && *checkRunID > 0 {
			r.CheckRunURL = safeURL(web + m.Repository + "/runs/" + itoa64(*checkRunID))
		}
	} else if r.Subject == "" {
		r.Subject = r.QualifiedID
	}
	if w.Repository != nil {
		r.Reservation = *w.Repository + " " + dbq.Deref(w.BaseRef) + " ← " + dbq.Deref(w.HeadRef)
	}
	if w.Status == queue.StatusAssigned {
		r.LeaseExpires = w.LeaseExpiresAt
		r.LeaseExpired = w.LeaseExpiresAt == nil || !w.LeaseExpiresAt.After(now)
	}
	if prNumber != nil {
		r.PRNumber = *prNumber
	}
	r.PRURL = safeURL(dbq.Deref(prURL))
	return r
}

// safeURL keeps only http(s) links, whatever a payload said.
func safeURL(s string) string {
	p, err := url.Parse(s)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return ""
	}
	return s
}

// listData is a list page: its filter, rows and the next page's link.
type listData struct {
	Filter  url.Values
	Rows    any
	Next    string
	Paged   bool
	Error   string
	Options map[string][]string
}

func (u *UI) items(c echo.Context) error {
	f, err := parseItemFilter(c.QueryParams())
	d := listData{Filter: f.values(), Options: map[string][]string{"status": statuses,
		"kind": {webhook.KindIssue, webhook.KindPullRequest}}}
	if err != nil {
		d.Error = err.Error()
		return u.render(c, http.StatusBadRequest, "items", page{Title: "Items", Nav: "items", Data: d})
	}
	rows, err := u.readItems(c.Request().Context(), f)
	if err != nil {
		return u.failErr(c, "listing items", err)
	}
	rows, d.Next = trimPage(rows, u.cfg.PageSize, "/ui/items", f.values(), "before",
		func(r itemRow) string { return cursor(r.EnqueuedAt, r.EntryID) })
	d.Rows, d.Paged = rows, f.Paged
	return u.render(c, http.StatusOK, "items", page{Title: "Items", Nav: "items", Refresh: u.refresh(), Data: d})
}

// itemData is the item page.
type itemData struct {
	Row         itemRow
	View        queue.View
	ViewJSON    string
	Dispatch    string
	Deliveries  []dbq.UIDeliveriesOfEntryRow
	Audit       []dbq.UIWorkItemAuditRow
	Writes      []dbq.UIOutboxOfEntryRow
	Generations []itemRow
	Actions     []string
}

func (u *UI) item(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := uuid.Parse(c.Param("id"))
	if err != nil {
		return u.fail(c, http.StatusNotFound, "There is no item with that entry ID.")
	}
	d, err := u.readItem(ctx, id)
	if errors.Is(err, queue.ErrNotFound) {
		return u.fail(c, http.StatusNotFound, "There is no item with that entry ID.")
	} else if err != nil {
		return u.failErr(c, "reading the item", err)
	}
	return u.render(c, http.StatusOK, "item", page{Title: "Item " + d.Row.Subject, Nav: "items", Data: d})
}

// actionsFor are the actions an item's status allows.
func actionsFor(r itemRow) []string {
	switch {
	case r.Status == queue.StatusPending:
		return []string{queue.ActionHold, queue.ActionDrop, queue.ActionCancel}
	case r.Status == queue.StatusHeld:
		return []string{queue.ActionRelease, queue.ActionDrop, queue.ActionCancel}
	case r.Status == queue.StatusAssigned && r.LeaseExpired:
		return []string{queue.ActionReclaim, queue.ActionCancel}
	case r.Status == queue.StatusAssigned:
		return []string{queue.ActionCancel}
	}
	return nil
}

func prettyJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out)
}

func (u *UI) deliveries(c echo.Context) error {
	f, err := parseDeliveryFilter(c.QueryParams())
	d := listData{Filter: f.values(), Options: map[string][]string{"outcome": outcomes}}
	if err != nil {
		d.Error = err.Error()
		return u.render(c, http.StatusBadRequest, "deliveries", page{Title: "Deliveries", Nav: "deliveries", Data: d})
	}
	rows, err := u.q.UIDeliveriesNewest(c.Request().Context(), u.pool, dbq.UIDeliveriesNewestParams{
		BeforeAt: f.BeforeAt, BeforeID: f.BeforeID, Outcome: f.Outcome, Event: f.Event, Lim: int32(u.cfg.PageSize + 1)})
	if err != nil {
		return u.failErr(c, "listing deliveries", err)
	}
	rows, d.Next = trimPage(rows, u.cfg.PageSize, "/ui/deliveries", f.values(), "before",
		func(r dbq.UIDeliveriesNewestRow) string { return cursor(r.ReceivedAt, r.DeliveryID) })
	d.Rows, d.Paged = rows, f.Paged
	return u.render(c, http.StatusOK, "deliveries", page{Title: "Deliveries", Nav: "deliveries", Refresh: u.refresh(), Data: d})
}

func (u *UI) outboxPage(c echo.Context) error {
	f, err := parseOutboxFilter(c.QueryParams())
	d := listData{Filter: url.Values{}, Options: map[string][]string{"status": {"pending", "failed"}}}
	if f.Status != "" {
		d.Filter.Set("status", f.Status)
	}
	if err != nil {
		d.Error = err.Error()
		return u.render(c, http.StatusBadRequest, "outbox", page{Title: "GitHub writes", Nav: "outbox", Data: d})
	}
	rows, err := u.q.UIOutboxOpen(c.Request().Context(), u.pool, dbq.UIOutboxOpenParams{
		AfterID: f.AfterID, Status: f.Status, Lim: int32(u.cfg.PageSize + 1)})
	if err != nil {
		return u.failErr(c, "listing GitHub writes", err)
	}
	rows, d.Next = trimPage(rows, u.cfg.PageSize, "/ui/outbox", d.Filter, "after",
		func(r dbq.UIOutboxOpenRow) string { return itoa64(r.ID) })
	d.Rows, d.Paged = rows, f.Paged
	return u.render(c, http.StatusOK, "outbox", page{Title: "GitHub writes", Nav: "outbox", Refresh: u.refresh(), Data: d})
}

// trimPage cuts rows (read with one row more than a page) to size and, when
// there was that one more, returns the next page's link: path with filter
// and key set to the cursor of the page's last row.
func trimPage[R any](rows []R, size int, path string, filter url.Values, key string, cursorOf func(R) string) ([]R, string) {
	if len(rows) <= size {
		return rows, ""
	}
	rows = rows[:size]
	v := url.Values{}
	for k, vals := range filter {
		v[k] = vals
	}
	v.Set(key, cursorOf(rows[size-1]))
	return rows, path + "?" + v.Encode()
}
