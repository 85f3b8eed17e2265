package githubtest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// checkRun is a check run and every annotation written to it.
type checkRun struct {
	id          int64
	suiteID     int64
	repo        *repo
	appID       int64
	name        string
	headSHA     string
	externalID  string
	detailsURL  string
	status      string
	conclusion  string
	startedAt   time.Time
	completedAt time.Time
	title       string
	summary     string
	text        string
	annotations []Annotation
	updates     int
	actions     []Action
	writes      []CheckRunWrite
}

// GitHub's limits on annotations.
const (
	maxAnnotationsPerRequest = 50
	maxRawDetails            = 64 * 1024
	maxAnnotationMessage     = 64 * 1024
	maxAnnotationTitle       = 255
)

// GitHub's limits on check run actions (the buttons a check run offers):
// at most 3, a label of 20 characters, a description of 40 and an
// identifier of 20. The schema holds all but the description's.
const (
	maxActions           = 3
	maxActionDescription = 40
)

func (s *Server) checkRunJSON(cr *checkRun) map[string]any {
	r := cr.repo
	var concl, completed any
	if cr.conclusion != "" {
		concl = cr.conclusion
	}
	if !cr.completedAt.IsZero() {
		completed = ts(cr.completedAt)
	}
	var ext, details any
	if cr.externalID != "" {
		ext = cr.externalID
	}
	details = cr.detailsURL
	if cr.detailsURL == "" {
		details = s.htmlURL("apps/%s", s.Slug)
	}
	var title, summary, text any
	if cr.title != "" {
		title = cr.title
	}
	if cr.summary != "" {
		summary = cr.summary
	}
	if cr.text != "" {
		text = cr.text
	}
	prs := []any{}
	for _, p := range r.pulls {
		if p.state == "open" && r.liveHead(p) == cr.headSHA {
			prs = append(prs, map[string]any{
				"id": p.id, "number": p.number, "url": s.apiURL("repos/%s/pulls/%d", r.fullName(), p.number),
				"head": map[string]any{"ref": p.head, "sha": cr.headSHA, "repo": map[string]any{"id": r.id, "name": r.name, "url": s.apiURL("repos/%s", r.fullName())}},
				"base": map[string]any{"ref": p.base, "sha": r.refs["refs/heads/"+p.base], "repo": map[string]any{"id": r.id, "name": r.name, "url": s.apiURL("repos/%s", r.fullName())}},
			})
		}
	}
	a := s.apps[cr.appID]
	return map[string]any{
		"id": cr.id, "node_id": nodeID("CR", cr.id), "head_sha": cr.headSHA, "external_id": ext,
		"url": s.apiURL("repos/%s/check-runs/%d", r.fullName(), cr.id), "html_url": s.htmlURL("%s/runs/%d", r.fullName(), cr.id),
		"details_url": details, "status": cr.status, "conclusion": concl,
		"started_at": ts(cr.startedAt), "completed_at": completed, "name": cr.name,
		"output": map[string]any{
			"title": title, "summary": summary, "text": text, "annotations_count": len(cr.annotations),
			"annotations_url": s.apiURL("repos/%s/check-runs/%d/annotations", r.fullName(), cr.id),
		},
		"check_suite": map[string]any{"id": cr.suiteID}, "app": s.appJSON(a), "pull_requests": prs,
	}
}

// checkRunInput is the validated content of a create or update body.
type checkRunInput struct {
	annotations []Annotation
	actions     []Action // nil: the body does not set them
}

// validateCheckRunBody applies the rules GitHub enforces beyond its schema.
// It returns GitHub's problem lines, empty when the body is acceptable.
func validateCheckRunBody(body map[string]any, update bool) (checkRunInput, []string) {
	var in checkRunInput
	var probs []string
	status, concl := str(body, "status"), str(body, "conclusion")
	if (status == "completed" || has(body, "completed_at")) && !has(body, "conclusion") {
		probs = append(probs, "\"conclusion\" wasn't supplied.")
	}
	if concl == "stale" {
		probs = append(probs, "Conclusion can't be set to stale: only GitHub can set this.")
	}
	if has(body, "conclusion") && body["conclusion"] == nil {
		probs = append(probs, "For 'properties/conclusion', nil is not a string.")
	}
	if d := str(body, "details_url"); d != "" {
		if u, err := url.Parse(d); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			probs = append(probs, fmt.Sprintf("details_url %q is not a valid http(s) URL.", d))
		}
	}
	if has(body, "actions") {
		list, _ := body["actions"].([]any)
		in.actions = []Action{}
		if len(list) > maxActions {
			probs = append(probs, fmt.Sprintf("For 'properties/actions', the array has %d items (maximum is %d).", len(list), maxActions))
		}
		for i, a := range list {
			m, _ := a.(map[string]any)
			act := Action{Label: str(m, "label"), Description: str(m, "description"), Identifier: str(m, "identifier")}
			for _, f := range [][2]string{{"label", act.Label}, {"description", act.Description}, {"identifier", act.Identifier}} {
				if strings.TrimSpace(f[1]) == "" {
					probs = append(probs, fmt.Sprintf("For 'actions/%d', %s can't be blank.", i, f[0]))
				}
			}
			if n := len([]rune(act.Description)); n > maxActionDescription {
				probs = append(probs, fmt.Sprintf("For 'actions/%d', description is too long (%d characters, maximum is %d).", i, n, maxActionDescription))
			}
			in.actions = append(in.actions, act)
		}
	}
	out, ok := body["output"].(map[string]any)
	if !ok {
		return in, probs
	}
	if update && !has(out, "title") {
		probs = append(probs, "For 'properties/output', \"title\" wasn't supplied.")
	}
	anns, _ := out["annotations"].([]any)
	for i, a := range anns {
		m, _ := a.(map[string]any)
		at := fmt.Sprintf("For 'output/annotations/%d'", i)
		ann := Annotation{
			Path: str(m, "path"), Level: str(m, "annotation_level"), Message: str(m, "message"),
			Title: str(m, "title"), RawDetails: str(m, "raw_details"),
		}
		sl, _ := intField(m, "start_line")
		el, _ := intField(m, "end_line")
		ann.StartLine, ann.EndLine = int(sl), int(el)
		if v, ok := intField(m, "start_column"); ok {
			ann.StartColumn = int(v)
		}
		if v, ok := intField(m, "end_column"); ok {
			ann.EndColumn = int(v)
		}
		switch {
		case sl < 1:
			probs = append(probs, at+", start_line must be at least 1.")
		case el < sl:
			probs = append(probs, at+", end_line must be greater than or equal to start_line.")
		}
		if (has(m, "start_column") || has(m, "end_column")) && sl != el {
			probs = append(probs, at+", start_column and end_column are only valid when start_line equals end_line.")
		}
		if strings.TrimSpace(ann.Path) == "" {
			probs = append(probs, at+", path can't be blank.")
		}
		if len(ann.RawDetails) > maxRawDetails {
			probs = append(probs, fmt.Sprintf("%s, raw_details is too long (%d bytes, maximum is %d).", at, len(ann.RawDetails), maxRawDetails))
		}
		if len(ann.Message) > maxAnnotationMessage {
			probs = append(probs, fmt.Sprintf("%s, message is too long (%d bytes, maximum is %d).", at, len(ann.Message), maxAnnotationMessage))
		}
		if len([]rune(ann.Title)) > maxAnnotationTitle {
			probs = append(probs, fmt.Sprintf("%s, title is too long (maximum is %d characters).", at, maxAnnotationTitle))
		}
		in.annotations = append(in.annotations, ann)
	}
	return in, probs
}

// applyCheckRun applies a validated create or update body.
// An empty name is ignored: go-github's UpdateCheckRunOptions always sends
// "name", empty when the caller does not rename the check run.
func applyCheckRun(cr *checkRun, body map[string]any, in checkRunInput, now time.Time) {
	if v := str(body, "name"); v != "" {
		cr.name = v
	}
	if has(body, "external_id") {
		cr.externalID = str(body, "external_id")
	}
	if has(body, "details_url") {
		cr.detailsURL = str(body, "details_url")
	}
	if v := str(body, "started_at"); v != "" {
		cr.startedAt, _ = time.Parse(time.RFC3339, v)
	}
	if v := str(body, "status"); v != "" {
		cr.status = v
		if v != "completed" {
			cr.conclusion, cr.completedAt = "", time.Time{}
		}
	}
	if v := str(body, "conclusion"); v != "" {
		cr.status, cr.conclusion = "completed", v
		if cr.completedAt.IsZero() {
			cr.completedAt = now.UTC().Truncate(time.Second)
		}
	}
	if v := str(body, "completed_at"); v != "" {
		cr.completedAt, _ = time.Parse(time.RFC3339, v)
	}
	if out, ok := body["output"].(map[string]any); ok {
		cr.title, cr.summary = str(out, "title"), str(out, "summary")
		if has(out, "text") {
			cr.text = str(out, "text")
		}
		cr.annotations = append(cr.annotations, in.annotations...)
	}
	if in.actions != nil {
		cr.actions = in.actions
	}
	out, _ := body["output"].(map[string]any)
	_, setsText := out["text"]
	cr.writes = append(cr.writes, CheckRunWrite{
		Time: now, Status: cr.status, Conclusion: cr.conclusion, Title: cr.title, Summary: cr.summary,
		Text: cr.text, SetsText: setsText, Actions: slices.Clone(cr.actions), SetsActions: in.actions != nil,
	})
}

// handleCreateCheckRun serves POST /repos/{owner}/{repo}/check-runs.
func (s *Server) handleCreateCheckRun(c *call) response {
	in, probs := validateCheckRunBody(c.json, false)
	if len(probs) > 0 {
		c.violatef("create check run: %s", strings.Join(probs, " "))
		return c.invalid(probs...)
	}
	if strings.TrimSpace(str(c.json, "name")) == "" {
		c.violatef("create check run: name is blank")
		return c.invalid("name can't be blank.")
	}
	sha := str(c.json, "head_sha")
	if c.repo.commits[sha] == nil {
		c.violatef("create check run: head_sha %q is not a commit of %s", sha, c.repo.fullName())
		return c.fail(http.StatusUnprocessableEntity, "No commit found for SHA: "+sha)
	}
	cr := &checkRun{
		id: s.newID(), suiteID: s.suiteFor(c.repo, sha), repo: c.repo, appID: s.AppID, headSHA: sha,
		status: "queued", startedAt: c.now.UTC().Truncate(time.Second),
	}
	applyCheckRun(cr, c.json, in, c.now)
	s.checkRuns[cr.id] = cr
	return response{status: http.StatusCreated, body: s.checkRunJSON(cr)}
}

// suiteFor returns the App's check suite ID for a commit (one per commit).
func (s *Server) suiteFor(r *repo, sha string) int64 {
	for _, cr := range s.checkRuns {
		if cr.repo == r && cr.headSHA == sha {
			return cr.suiteID
		}
	}
	return s.newID()
}

func (c *call) checkRunByPath() *checkRun {
	id, err := strconv.ParseInt(c.r.PathValue("check_run_id"), 10, 64)
	if err != nil {
		return nil
	}
	cr := c.s.checkRuns[id]
	if cr == nil || cr.repo != c.repo {
		return nil
	}
	return cr
}

// handleUpdateCheckRun serves PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}.
func (s *Server) handleUpdateCheckRun(c *call) response {
	cr := c.checkRunByPath()
	if cr == nil {
		c.violatef("update check run %s: no such check run in %s", c.r.PathValue("check_run_id"), c.repo.fullName())
		return c.notFound()
	}
	in, probs := validateCheckRunBody(c.json, true)
	if len(probs) > 0 {
		c.violatef("update check run %d: %s", cr.id, strings.Join(probs, " "))
		return c.invalid(probs...)
	}
	applyCheckRun(cr, c.json, in, c.now)
	cr.updates++
	return response{status: http.StatusOK, body: s.checkRunJSON(cr)}
}

// handleGetCheckRun serves GET /repos/{owner}/{repo}/check-runs/{check_run_id}.
func (s *Server) handleGetCheckRun(c *call) response {
	cr := c.checkRunByPath()
	if cr == nil {
		return c.notFound()
	}
	return response{status: http.StatusOK, body: s.checkRunJSON(cr)}
}

// handleListAnnotations serves GET /repos/{owner}/{repo}/check-runs/{check_run_id}/annotations.
func (s *Server) handleListAnnotations(c *call) response {
	cr := c.checkRunByPath()
	if cr == nil {
		return c.notFound()
	}
	lo, hi, link := c.page(len(cr.annotations))
	list := make([]any, 0, hi-lo)
	for _, a := range cr.annotations[lo:hi] {
		m := map[string]any{
			"path": a.Path, "start_line": a.StartLine, "end_line": a.EndLine, "annotation_level": a.Level,
			"message": a.Message, "title": a.Title, "raw_details": a.RawDetails,
			"blob_href":    s.htmlURL("%s/blob/%s/%s", cr.repo.fullName(), cr.headSHA, a.Path),
			"start_column": nil, "end_column": nil,
		}
		if a.StartColumn != 0 {
			m["start_column"] = a.StartColumn
		}
		if a.EndColumn != 0 {
			m["end_column"] = a.EndColumn
		}
		list = append(list, m)
	}
	res := response{status: http.StatusOK, body: list}
	if link != "" {
		res.header = map[string]string{"Link": link}
	}
	return res
}

// handleListCheckRunsForRef serves GET /repos/{owner}/{repo}/commits/{ref}/check-runs
// with check_name, status, app_id and filter (latest, the default, keeps
// only the most recent check run of each name and App).
func (s *Server) handleListCheckRunsForRef(c *call) response {
	r := c.repo
	ref := checkRunsRef(c.r)
	sha := ""
	switch {
	case r.commits[ref] != nil:
		sha = ref
	case r.refs["refs/heads/"+ref] != "":
		sha = r.refs["refs/heads/"+ref]
	case r.refs["refs/tags/"+ref] != "":
		sha = r.refs["refs/tags/"+ref]
	case r.refs["refs/"+ref] != "":
		sha = r.refs["refs/"+ref]
	default:
		c.violatef("list check runs: %q is not a commit, branch or tag of %s", ref, r.fullName())
		return c.fail(http.StatusUnprocessableEntity, "No commit found for SHA: "+ref)
	}
	q := c.r.URL.Query()
	var runs []*checkRun
	for _, cr := range s.checkRuns {
		if cr.repo != r || cr.headSHA != sha {
			continue
		}
		if v := q.Get("check_name"); v != "" && cr.name != v {
			continue
		}
		if v := q.Get("status"); v != "" && cr.status != v {
			continue
		}
		if v := q.Get("app_id"); v != "" && strconv.FormatInt(cr.appID, 10) != v {
			continue
		}
		runs = append(runs, cr)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].id > runs[j].id })
	if q.Get("filter") != "all" {
		seen := map[string]bool{}
		latest := runs[:0:0]
		for _, cr := range runs {
			k := cr.name + "\x00" + strconv.FormatInt(cr.appID, 10)
			if !seen[k] {
				seen[k] = true
				latest = append(latest, cr)
			}
		}
		runs = latest
	}
	lo, hi, link := c.page(len(runs))
	list := make([]any, 0, hi-lo)
	for _, cr := range runs[lo:hi] {
		list = append(list, s.checkRunJSON(cr))
	}
	res := response{status: http.StatusOK, body: map[string]any{"total_count": len(runs), "check_runs": list}}
	if link != "" {
		res.header = map[string]string{"Link": link}
	}
	return res
}
