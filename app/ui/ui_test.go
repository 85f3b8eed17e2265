package ui

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
)

var pages = []string{"/ui/", "/ui/items", "/ui/deliveries", "/ui/outbox"}

func TestDisabledAnswers404(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{ViewToken: viewToken})
	b := f.anonymous()
	for _, p := range append(pages, "/ui", "/ui/login", "/ui/static/ui.css", "/ui/items/"+uuid.NewString()) {
		if r := b.get(p); r.code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, r.code)
		}
	}
	if r := b.post("/ui/login", url.Values{"token": {viewToken}}); r.code != http.StatusNotFound {
		t.Errorf("POST /ui/login = %d, want 404", r.code)
	}
}

func TestWithoutSessionRedirectsToLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	id := f.enqueue("github_issue", "acme/widgets", 1)
	b := f.anonymous()
	for _, p := range append(pages, "/ui/items/"+id, "/ui/nowhere") {
		if r := b.get(p); r.code != http.StatusSeeOther || r.location != "/ui/login" {
			t.Errorf("GET %s = %d to %q, want 303 to /ui/login", p, r.code, r.location)
		}
	}
	if r := b.post("/ui/items/"+id+"/hold", url.Values{"csrf": {"x"}}); r.code != http.StatusForbidden {
		t.Errorf("POST hold without a session = %d, want 403", r.code)
	}
	if r := b.get("/ui/login"); r.code != http.StatusOK || !strings.Contains(r.body, `name="token"`) {
		t.Errorf("login page = %d", r.code)
	}
	if r := b.get("/ui/static/live.js"); r.code != http.StatusOK {
		t.Errorf("static asset without a session = %d, want 200", r.code)
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	tests := []struct {
		name, token, proto string
		code               int
		kind               string
	}{
		{"admin", adminToken, "", http.StatusSeeOther, KindAdmin},
		{"view", viewToken, "", http.StatusSeeOther, KindView},
		{"admin behind https", adminToken, "https", http.StatusSeeOther, KindAdmin},
		{"wrong", "nope", "", http.StatusUnauthorized, ""},
		{"empty", "", "", http.StatusUnauthorized, ""},
		{"prefix of admin", adminToken[:5], "", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := f.anonymous()
			req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/ui/login", strings.NewReader(url.Values{"token": {tt.token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tt.proto != "" {
				req.Header.Set("X-Forwarded-Proto", tt.proto)
			}
			r := b.do(req)
			if r.code != tt.code {
				t.Fatalf("code = %d, want %d: %s", r.code, tt.code, r.body)
			}
			cookies := (&http.Response{Header: r.header}).Cookies()
			if tt.kind == "" {
				if len(cookies) != 0 {
					t.Fatalf("a failed sign-in set cookies: %v", cookies)
				}
				return
			}
			if len(cookies) != 1 {
				t.Fatalf("cookies = %v", cookies)
			}
			c := cookies[0]
			if c.Name != Cookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui" || c.Secure != (tt.proto == "https") || c.MaxAge <= 0 {
				t.Errorf("cookie = %+v", c)
			}
			s, err := parseSession(f.ui.key, c.Value, f.clk.Now())
			if err != nil || s.Kind != tt.kind {
				t.Errorf("session = %+v, %v; want kind %s", s, err, tt.kind)
			}
		})
	}
}

func TestSessionExpiresAndLogout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{AdminToken: adminToken, SessionTTL: time.Hour})
	b := f.signIn(adminToken)
	if r := b.get("/ui/"); r.code != http.StatusOK {
		t.Fatalf("overview = %d", r.code)
	}
	csrf := b.csrf()
	if r := b.post("/ui/logout", url.Values{"csrf": {csrf}}); r.code != http.StatusSeeOther {
		t.Fatalf("logout = %d", r.code)
	}
	if r := b.get("/ui/"); r.code != http.StatusSeeOther {
		t.Errorf("after logout = %d, want 303", r.code)
	}
	b = f.signIn(adminToken)
	f.clk.Advance(time.Hour + time.Second)
	if r := b.get("/ui/items"); r.code != http.StatusSeeOther || r.location != "/ui/login" {
		t.Errorf("expired session = %d to %q, want 303 to /ui/login", r.code, r.location)
	}
}

func TestPagesRender(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	issue := f.enqueue("github_issue", "acme/widgets", 12)
	pr := f.enqueue("github_pull_request", "acme/widgets", 13)
	f.deliver("d-1", "issues", "enqueued", issue)
	f.deliver("d-2", "issues", "subject_collision", issue)
	f.deliver("d-3", "pull_request", "enqueued", pr)
	for _, token := range []string{adminToken, viewToken} {
		b := f.signIn(token)
		want := map[string][]string{
			"/ui/":               {"Items by status", "Deliveries, last hour", "GitHub writes", "not configured", "Lease owners"},
			"/ui/items":          {"acme/widgets#12", "acme/widgets#13", "https://github.com/acme/widgets/issues/12"},
			"/ui/items/" + issue: {"gitlease/entry/get", "Dispatch", "d-1", "d-2", "subject_collision", "Audit log"},
			"/ui/items/" + pr:    {"check_run", "not sent yet"},
			"/ui/deliveries":     {"d-1", "d-2", "d-3", "octocat", "issues/opened"},
			"/ui/outbox":         {"check_run", "pending"},
		}
		for p, needles := range want {
			r := b.get(p)
			if r.code != http.StatusOK {
				t.Errorf("%s GET %s = %d", token, p, r.code)
				continue
			}
			if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("GET %s: Content-Security-Policy = %q", p, csp)
			}
			for _, n := range needles {
				if !strings.Contains(r.body, n) {
					t.Errorf("%s GET %s: no %q in the page", token, p, n)
				}
			}
		}
		// Only an admin session is offered actions.
		r := b.get("/ui/items/" + issue)
		if has := strings.Contains(r.body, "/ui/items/"+issue+"/hold"); has != (token == adminToken) {
			t.Errorf("%s: hold offered = %v", token, has)
		}
	}
	b := f.signIn(adminToken)
	if r := b.get("/ui/items/" + uuid.NewString()); r.code != http.StatusNotFound {
		t.Errorf("unknown item = %d, want 404", r.code)
	}
	if r := b.get("/ui/items/not-a-uuid"); r.code != http.StatusNotFound {
		t.Errorf("malformed item ID = %d, want 404", r.code)
	}
}

func TestItemsFilters(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	a1 := f.enqueue("github_issue", "acme/widgets", 1)
	a2 := f.enqueue("github_pull_request", "acme/widgets", 2)
	b1 := f.enqueue("github_issue", "other/repo", 3)
	if err := f.store.Act(context.Background(), queue.ActParams{EntryID: a1, Action: queue.ActionHold, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	subjectOf := func(id string) string { it, _ := f.store.Get(context.Background(), id); return it.QualifiedID() }
	b := f.signIn(viewToken)
	tests := []struct {
		name  string
		query url.Values
		code  int
		want  []string
	}{
		{"all", nil, 200, []string{b1, a2, a1}},
		{"status", url.Values{"status": {"held"}}, 200, []string{a1}},
		{"status pending", url.Values{"status": {"pending"}}, 200, []string{b1, a2}},
		{"repository", url.Values{"repository": {"ACME/widgets"}}, 200, []string{a2, a1}},
		{"kind", url.Values{"kind": {"github_pull_request"}}, 200, []string{a2}},
		{"subject", url.Values{"subject": {subjectOf(b1)}}, 200, []string{b1}},
		{"subject and status", url.Values{"subject": {subjectOf(b1)}, "status": {"held"}}, 200, nil},
		{"status and repository", url.Values{"status": {"pending"}, "repository": {"other/repo"}}, 200, []string{b1}},
		{"bad status", url.Values{"status": {"nope"}}, 400, nil},
		{"bad repository", url.Values{"repository": {"no slash"}}, 400, nil},
		{"bad subject", url.Values{"subject": {"plain"}}, 400, nil},
		{"bad cursor", url.Values{"before": {"x_y"}}, 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.get("/ui/items?" + tt.query.Encode())
			if r.code != tt.code {
				t.Fatalf("code = %d, want %d", r.code, tt.code)
			}
			if got := itemLinks(r.body); tt.code == 200 && strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("items = %v, want %v", got, tt.want)
			}
		})
	}
}

// itemLinks are the entry IDs a list links to, in order, each once.
func itemLinks(body string) []string {
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.Split(body, `href="/ui/items/`)[1:] {
		id, _, _ := strings.Cut(part, `"`)
		if _, err := uuid.Parse(id); err == nil && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func TestKeysetPagination(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{AdminToken: adminToken, PageSize: 3})
	var want []string
	for i := range 8 {
		want = append([]string{f.enqueue("github_issue", "acme/widgets", i+1)}, want...)
	}
	for i := range 7 {
		f.deliver("delivery-"+string(rune('a'+i)), "issues", "ignored", "")
		f.clk.Advance(time.Second)
	}
	b := f.signIn(adminToken)

	var got []string
	next, pages := "/ui/items", 0
	for next != "" {
		r := b.get(next)
		if r.code != http.StatusOK {
			t.Fatalf("GET %s = %d", next, r.code)
		}
		got = append(got, itemLinks(r.body)...)
		next = nextLink(r.body)
		if pages++; pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Errorf("%d pages of items %v, want 3 pages of %v", pages, got, want)
	}

	// Deliveries: 7 in pages of 3, newest first, the filter kept.
	var ids []string
	next = "/ui/deliveries?outcome=ignored"
	for next != "" {
		r := b.get(next)
		for _, part := range strings.Split(r.body, "<td><code>delivery-")[1:] {
			ids = append(ids, part[:1])
		}
		next = nextLink(r.body)
		if next != "" && !strings.Contains(next, "outcome=ignored") {
			t.Errorf("next link %q lost the filter", next)
		}
	}
	if strings.Join(ids, "") != "gfedcba" {
		t.Errorf("deliveries = %v, want g..a", ids)
	}
}

func nextLink(body string) string {
	_, after, ok := strings.Cut(body, `rel="next"`)
	if !ok {
		return ""
	}
	_ = after
	i := strings.LastIndex(body[:strings.Index(body, `rel="next"`)], `href="`)
	link := body[i+len(`href="`):]
	link, _, _ = strings.Cut(link, `"`)
	return strings.ReplaceAll(link, "&amp;", "&")
}

func TestActionsWriteTheAuditLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	id := f.enqueue("github_issue", "acme/widgets", 5)
	b := f.signIn(adminToken)
	csrf := b.csrf()
	steps := []struct {
		action  string
		form    url.Values
		code    int
		status  string
		confirm bool
	}{
		{"hold", nil, 303, queue.StatusHeld, false},
		{"hold", nil, 409, queue.StatusHeld, false},
		{"release", nil, 303, queue.StatusPending, false},
		{"reclaim", nil, 409, queue.StatusPending, false},
		{"drop", nil, 200, queue.StatusPending, true},
		{"drop", url.Values{"confirm": {"yes"}}, 303, queue.StatusDropped, false},
		{"release", nil, 409, queue.StatusDropped, false},
	}
	for i, s := range steps {
		form := url.Values{"csrf": {csrf}}
		for k, v := range s.form {
			form[k] = v
		}
		r := b.post("/ui/items/"+id+"/"+s.action, form)
		if r.code != s.code {
			t.Fatalf("step %d %s = %d, want %d: %s", i, s.action, r.code, s.code, r.body)
		}
		if s.confirm && !strings.Contains(r.body, "cannot be undone") {
			t.Errorf("step %d: no confirmation page", i)
		}
		if got := f.status(id); got != s.status {
			t.Fatalf("step %d %s: status %s, want %s", i, s.action, got, s.status)
		}
	}
	log := f.audit(id)
	var got []string
	for _, a := range log {
		got = append(got, a.Method+":"+a.FromStatus+">"+a.ToStatus+":"+dbq.Deref(a.Reason))
	}
	want := []string{
		"operator/hold:pending>held:dashboard admin session",
		"operator/release:held>pending:dashboard admin session",
		"operator/drop:pending>dropped:dashboard admin session",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("audit log = %v, want %v", got, want)
	}
	if r := b.get("/ui/items/" + id); !strings.Contains(r.body, "operator/drop") {
		t.Error("the item page does not show its audit log")
	}
	// Cancel, on another item: it asks first, then ends it cancelled with
	// the session in its audit log and end reason; a read-only session
	// and a missing CSRF token are refused.
	other := f.enqueue("github_issue", "acme/widgets", 6)
	if r := b.post("/ui/items/"+other+"/cancel", url.Values{"csrf": {csrf}}); r.code != 200 || !strings.Contains(r.body, "cannot be undone") || f.status(other) != queue.StatusPending {
		t.Fatalf("cancel without confirmation = %d, status %s", r.code, f.status(other))
	}
	if r := b.post("/ui/items/"+other+"/cancel", url.Values{"confirm": {"yes"}}); r.code != http.StatusForbidden {
		t.Errorf("cancel without CSRF = %d, want 403", r.code)
	}
	if r := b.post("/ui/items/"+other+"/cancel", url.Values{"csrf": {csrf}, "confirm": {"yes"}}); r.code != 303 || f.status(other) != queue.StatusCancelled {
		t.Fatalf("cancel = %d, status %s", r.code, f.status(other))
	}
	if a := f.audit(other); len(a) != 1 || a[0].Method != "operator/cancel" || a[0].ToStatus != queue.StatusCancelled {
		t.Errorf("audit after cancel = %+v", a)
	}
	if r := b.post("/ui/items/"+id+"/explode", url.Values{"csrf": {csrf}}); r.code != http.StatusNotFound {
		t.Errorf("unknown action = %d, want 404", r.code)
	}
	if r := b.post("/ui/items/"+uuid.NewString()+"/hold", url.Values{"csrf": {csrf}}); r.code != http.StatusNotFound {
		t.Errorf("unknown item = %d, want 404", r.code)
	}
}

func TestReclaimExpiredLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	id := f.enqueue("github_issue", "acme/widgets", 9)
	res, err := f.store.Lease(context.Background(), queue.LeaseParams{Max: 1, OwnerID: "worker-1", WorkflowIDs: []string{"wf-1"}})
	if err != nil || len(res.Leased) != 1 {
		t.Fatalf("lease: %+v %v", res, err)
	}
	b := f.signIn(adminToken)
	csrf := b.csrf()
	if r := b.post("/ui/items/"+id+"/reclaim", url.Values{"csrf": {csrf}}); r.code != http.StatusConflict {
		t.Fatalf("reclaim of a live lease = %d, want 409", r.code)
	}
	if r := b.get("/ui/"); !strings.Contains(r.body, "worker-1") {
		t.Error("the overview does not show the lease owner")
	}
	f.clk.Advance(queue.DefaultLeaseTTL + time.Minute)
	if r := b.get("/ui/items/" + id); !strings.Contains(r.body, "Give the expired lease back") {
		t.Error("the item page does not offer to give the expired lease back")
	}
	if r := b.post("/ui/items/"+id+"/reclaim", url.Values{"csrf": {csrf}}); r.code != http.StatusSeeOther {
		t.Fatalf("reclaim = %d", r.code)
	}
	if st := f.status(id); st != queue.StatusPending {
		t.Fatalf("status = %s, want pending", st)
	}
	log := f.audit(id)
	if len(log) != 1 || log[0].Method != "operator/reclaim" || log[0].FromStatus != "assigned" {
		t.Errorf("audit = %+v", log)
	}
	// The next hand-out is one lease generation up, so the dead owner's fence is stale.
	again, err := f.store.Lease(context.Background(), queue.LeaseParams{Max: 1, OwnerID: "worker-2", WorkflowIDs: []string{"wf-2"}})
	if err != nil || len(again.Leased) != 1 || again.Leased[0].Execution.QueueLease.Generation != 2 {
		t.Fatalf("lease again: %+v %v", again, err)
	}
}

func TestCSRFAndReadOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	id := f.enqueue("github_issue", "acme/widgets", 3)
	admin, other, view := f.signIn(adminToken), f.signIn(adminToken), f.signIn(viewToken)
	otherCSRF, viewCSRF := other.csrf(), view.csrf()
	posts := []string{"/ui/items/" + id + "/hold", "/ui/items/" + id + "/drop", "/ui/items/" + id + "/cancel", "/ui/outbox/1/retry", "/ui/scan"}
	tests := []struct {
		name string
		b    *browser
		form url.Values
	}{
		{"admin without token", admin, url.Values{}},
		{"admin with a wrong token", admin, url.Values{"csrf": {"AAAA"}}},
		{"admin with another session's token", admin, url.Values{"csrf": {otherCSRF}}},
		{"read-only with its token", view, url.Values{"csrf": {viewCSRF}, "confirm": {"yes"}}},
	}
	for _, tt := range tests {
		for _, p := range posts {
			if r := tt.b.post(p, tt.form); r.code != http.StatusForbidden {
				t.Errorf("%s: POST %s = %d, want 403", tt.name, p, r.code)
			}
		}
	}
	if st := f.status(id); st != queue.StatusPending || len(f.audit(id)) != 0 {
		t.Errorf("a refused action changed the item: %s, %v", st, f.audit(id))
	}
	if r := view.post("/ui/logout", url.Values{"csrf": {viewCSRF}}); r.code != http.StatusSeeOther {
		t.Errorf("a read-only session cannot sign out: %d", r.code)
	}
}

func TestRetryFailedGitHubWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	id := f.enqueue("github_pull_request", "acme/widgets", 4)
	ctx := context.Background()
	writes, err := f.q.UIOutboxOfEntry(ctx, f.pool, new(uuid.MustParse(id)))
	if err != nil || len(writes) != 1 {
		t.Fatalf("writes: %v %v", writes, err)
	}
	w := writes[0]
	if err := f.q.OutboxFail(ctx, f.pool, dbq.OutboxFailParams{ID: w.ID, Now: f.clk.Now(), LastError: new("422 Unprocessable Entity: head_sha is not a commit")}); err != nil {
		t.Fatal(err)
	}
	b := f.signIn(adminToken)
	r := b.get("/ui/outbox?status=failed")
	if !strings.Contains(r.body, "head_sha is not a commit") || !strings.Contains(r.body, "/retry") {
		t.Fatalf("the failed write and its retry are not on the outbox page")
	}
	if r := b.get("/ui/"); !strings.Contains(r.body, `outbox?status=failed`) {
		t.Error("no failed count on the overview")
	}
	csrf := b.csrf()
	path := "/ui/outbox/" + itoa64(w.ID) + "/retry"
	if r := b.post(path, url.Values{"csrf": {csrf}, "back": {"item"}}); r.code != http.StatusSeeOther || r.location != "/ui/items/"+id+"?done=retry" {
		t.Fatalf("retry = %d to %q", r.code, r.location)
	}
	after, _ := f.q.UIOutboxOfEntry(ctx, f.pool, new(uuid.MustParse(id)))
	if after[0].Status != "pending" || after[0].FinishedAt != nil {
		t.Errorf("after retry: %+v", after[0])
	}
	if r := b.post(path, url.Values{"csrf": {csrf}}); r.code != http.StatusConflict {
		t.Errorf("retry of a pending write = %d, want 409", r.code)
	}
	log := f.audit(id)
	if len(log) != 1 || log[0].Method != "operator/retry_github_write" || !strings.HasPrefix(dbq.Deref(log[0].Reason), "dashboard admin session") {
		t.Errorf("audit = %+v", log)
	}
}

// TestGitHubWritesShowGitHubsAnswers: the item page and /ui/outbox show
// what GitHub answered each write, a sent one's as well as a refused one's.
func TestGitHubWritesShowGitHubsAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	ctx := context.Background()
	sent, refused := f.enqueue("github_pull_request", "acme/widgets", 5), f.enqueue("github_pull_request", "acme/widgets", 6)
	row := func(id string) dbq.UIOutboxOfEntryRow {
		t.Helper()
		writes, err := f.q.UIOutboxOfEntry(ctx, f.pool, new(uuid.MustParse(id)))
		if err != nil || len(writes) != 1 {
			t.Fatalf("writes of %s: %v %v", id, writes, err)
		}
		return writes[0]
	}
	created := "201 created check run 123 on 0123abc (queued)"
	if err := f.q.OutboxDone(ctx, f.pool, dbq.OutboxDoneParams{ID: row(sent).ID, Now: f.clk.Now(), LastAnswer: new(created)}); err != nil {
		t.Fatal(err)
	}
	refusal := "422 POST /repos/acme/widgets/check-runs: No commit found for SHA: 0123abc"
	if err := f.q.OutboxFail(ctx, f.pool, dbq.OutboxFailParams{ID: row(refused).ID, Now: f.clk.Now(),
		LastError:  new("create check run: POST https://api.github.com/repos/acme/widgets/check-runs: 422 No commit found for SHA: 0123abc []"),
		LastAnswer: new(refusal)}); err != nil {
		t.Fatal(err)
	}
	b := f.signIn(viewToken)
	if r := b.get("/ui/items/" + sent); r.code != http.StatusOK || !strings.Contains(r.body, created) || strings.Contains(r.body, ">accepted<") {
		t.Errorf("item page of a sent write (%d) does not show GitHub's answer %q", r.code, created)
	}
	for _, path := range []string{"/ui/items/" + refused, "/ui/outbox?status=failed"} {
		r := b.get(path)
		if r.code != http.StatusOK || !strings.Contains(r.body, `<span class="bad" title="create check run: POST https://api.github.com`) ||
			!strings.Contains(r.body, refusal) {
			t.Errorf("%s (%d) does not show GitHub's refusal %q", path, r.code, refusal)
		}
	}
}

// reconciler is a Reconciler that counts its scans.
type reconciler struct{ scans atomic.Int64 }

func (r *reconciler) ScanNow(context.Context) error { r.scans.Add(1); return nil }

func (r *reconciler) Status(context.Context) (ReconcileStatus, error) {
	return ReconcileStatus{LastScan: time.Now(), Missed: 3 + r.scans.Load(), Redelivered: 2, Unrecoverable: 1}, nil
}

func TestScanNow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, adminConfig())
	b := f.signIn(adminToken)
	if r := b.post("/ui/scan", url.Values{"csrf": {b.csrf()}}); r.code != http.StatusConflict || !strings.Contains(r.body, "not configured") {
		t.Errorf("scan without a reconciler = %d", r.code)
	}

	rec := &reconciler{}
	g := newFixture(t, Config{AdminToken: adminToken, Reconciler: rec})
	b = g.signIn(adminToken)
	if r := b.get("/ui/"); !strings.Contains(r.body, "Scan now") || !strings.Contains(r.body, "unrecoverable") {
		t.Fatal("the overview does not show the reconciler")
	}
	if r := b.post("/ui/scan", url.Values{"csrf": {b.csrf()}}); r.code != http.StatusSeeOther || rec.scans.Load() != 1 {
		t.Fatalf("scan = %d, scans %d", r.code, rec.scans.Load())
	}
	if r := b.get("/ui/?done=scan"); !strings.Contains(r.body, "The scan for missed deliveries ran.") || !strings.Contains(r.body, ">4<") {
		t.Error("the overview after a scan does not say so")
	}
}

func TestOverviewCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{AdminToken: adminToken, CountsTTL: time.Minute})
	a := f.enqueue("github_issue", "acme/widgets", 1)
	f.enqueue("github_issue", "acme/widgets", 2)
	b := f.signIn(adminToken)
	count := func(body, status string) string {
		_, after, _ := strings.Cut(body, `href="/ui/items?status=`+status+`">`+status+`</a></th>`)
		v, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(after), `<td class="num">`), "<")
		return v
	}
	r := b.get("/ui/")
	if count(r.body, "pending") != "2" || count(r.body, "dropped") != "0" {
		t.Fatalf("counts: pending %q dropped %q", count(r.body, "pending"), count(r.body, "dropped"))
	}
	if err := f.store.Act(context.Background(), queue.ActParams{EntryID: a, Action: queue.ActionDrop, Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	// Live counts are read on every view; finished ones are cached for CountsTTL.
	r = b.get("/ui/")
	if count(r.body, "pending") != "1" || count(r.body, "dropped") != "0" {
		t.Errorf("within the TTL: pending %q dropped %q, want 1 and the cached 0", count(r.body, "pending"), count(r.body, "dropped"))
	}
	f.clk.Advance(time.Minute)
	r = b.get("/ui/")
	if count(r.body, "dropped") != "1" {
		t.Errorf("after the TTL: dropped %q, want 1", count(r.body, "dropped"))
	}
	if !strings.Contains(r.body, "Oldest pending item") || strings.Contains(r.body, "none pending") {
		t.Error("no oldest pending age")
	}
	// The test server has no synchronous standby.
	if !strings.Contains(r.body, `<td id="durability" class="bad"><code>local</code></td>`) {
		t.Error("the overview does not say the durability is local")
	}
}

// TestRotatingATokenEndsSessions: a cookie signed under one pair of tokens
// is refused once either token changes.
func TestRotatingATokenEndsSessions(t *testing.T) {
	now := time.Now()
	s, err := newSession(KindView, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cookie := s.encode(sessionKey("admin-1", "view-1"))
	for _, k := range [][2]string{{"admin-1", "view-2"}, {"admin-2", "view-1"}, {"admin-1", ""}} {
		if _, err := parseSession(sessionKey(k[0], k[1]), cookie, now); err == nil {
			t.Errorf("a session survived tokens %v", k)
		}
	}
	if _, err := parseSession(sessionKey("admin-1", "view-1"), cookie, now); err != nil {
		t.Errorf("the same tokens refuse their own session: %v", err)
	}
}

// TestOverviewShowsInstallations: per installation, the overview shows its
// pending and assigned items, the cap, whether leases pass it over, and its
// GitHub budget as the limiter recorded it.
func TestOverviewShowsInstallations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, adminConfig())
	f.enqueue("github_issue", "acme/widgets", 1) // installation 7
	f.enqueue("github_issue", "acme/widgets", 2)
	if _, err := f.store.Lease(ctx, queue.LeaseParams{Max: 1, OwnerID: "w", WorkflowIDs: []string{"wf"}}); err != nil {
		t.Fatal(err)
	}
	reset := f.clk.Now().Add(20 * time.Minute)
	github.NewBudgets(f.pool, f.store, slog.New(slog.NewTextHandler(io.Discard, nil))).RecordBudget(ctx, github.Budget{
		InstallationID: 7, Remaining: new(0), Limit: new(5000), Reset: &reset, LimitedUntil: reset, Reason: "primary", Observed: f.clk.Now()})
	r := f.signIn(adminToken).get("/ui/")
	_, table, _ := strings.Cut(r.body, "<h2>Installations</h2>")
	table, _, _ = strings.Cut(table, "</table>")
	cells := regexp.MustCompile(`<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(table, -1)
	var got []string
	for _, c := range cells {
		got = append(got, regexp.MustCompile(`<[^>]+>`).ReplaceAllString(c[1], ""))
	}
	want := []string{"7", "1", "1", "none", "paused until " + reset.UTC().Format("2006-01-02 15:04:05Z") + " (primary limit)", "0", "5000", reset.UTC().Format("2006-01-02 15:04:05Z")}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("installations row %q,\nwant %q", got, want)
	}
}
