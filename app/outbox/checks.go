package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/db/dbq"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// maxAnnotations is GitHub's limit of annotations per check-run request.
const maxAnnotations = 50

// annotationKey marks an annotation with the outbox row and position that
// wrote it, so a retry after a lost response does not add it twice.
func annotationKey(rowID int64, i int) string { return fmt.Sprintf("%d.%d", rowID, i) }

// toGitHub renders annotations for GitHub, their raw_details carrying the
// structured data plus the key.
func toGitHub(rowID int64, anns []Annotation) []*gh.CheckRunAnnotation {
	out := make([]*gh.CheckRunAnnotation, 0, len(anns))
	for i, a := range anns {
		details := map[string]any{}
		_ = json.Unmarshal(a.RawDetails, &details) // details we wrote are an object; anything else is dropped
		details["gitlease_annotation"] = annotationKey(rowID, i)
		raw, _ := json.Marshal(details)
		out = append(out, &gh.CheckRunAnnotation{
			Path: gh.String(".github"), StartLine: gh.Int(1), EndLine: gh.Int(1),
			AnnotationLevel: gh.String(a.Level), Title: gh.String(a.Title),
			Message: gh.String(a.Message), RawDetails: gh.String(string(raw)),
		})
	}
	return out
}

// page is the summary a check run's state change writes: the row's
// headline over the item's summary page, and, once concluded, the end of
// the command's output.
func (s *Sender) page(t target, u checkRunUpdate) string {
	f := s.facts(t, u.Summary)
	if u.Status == "completed" {
		return summaryPage(f) + noteText(t.w.Note())
	}
	return summaryPage(f)
}

// facts gathers what the summary page says of t's item.
func (s *Sender) facts(t target, headline string) pageFacts {
	w, g := t.w, t.g
	f := pageFacts{
		headline: headline, subject: w.QualifiedID(), generation: w.Generation(), entryID: w.EntryID(),
		meta: t.m, branch: dbq.Deref(g.Branch), prURL: dbq.Deref(g.PrUrl),
		dashboard: detailsURL(s.cfg.PublicURL, w.EntryID()), started: w.AssignedAt(), ended: w.FinishedAt(), now: s.cfg.Now(),
	}
	if g.PrNumber != nil {
		f.prNumber = int(*g.PrNumber)
	}
	if f.branch == "" && t.m.Kind == webhook.KindPullRequest {
		if r := w.Reservation(); r != nil {
			f.branch = strings.TrimPrefix(r.HeadRef, "refs/heads/")
		}
	}
	f.exitCode = t.end.ExitCode
	if fe := w.Fence(); fe != nil && fe.QueueLease != nil {
		f.worker = fe.QueueLease.OwnerID
		if f.ended.IsZero() {
			f.leaseExpiry = fe.QueueLease.ExpiresAt.Time
		}
	}
	return f
}

// sendCheckRun brings an item's check run to the row's state: created if
// it has none yet (found again by external_id only after an answer that may
// have been lost), else updated, with annotations at most 50 per request
// and never twice. What the check run shows is recorded, so a clean run
// never reads it back: a pull-request item costs three calls (created,
// in progress, completed), an issue item two.
func (s *Sender) sendCheckRun(ctx context.Context, row dbq.Outbox, at *attempt) error {
	var u checkRunUpdate
	if err := decodePayload(row, &u); err != nil {
		return err
	}
	t, err := s.targetOf(ctx, row)
	if err != nil {
		return err
	}
	w, g, m, c := t.w, t.g, t.m, t.c
	owner, repo, _ := strings.Cut(m.Repository, "/")
	entry := w.EntryID()
	anns := toGitHub(row.ID, u.Annotations)
	headSHA := dbq.Deref(g.HeadSha) // an issue item's branch head
	if headSHA == "" {
		headSHA = m.HeadSHA // a pull request's head, as delivered
	}
	if headSHA == "" {
		return &github.PermanentError{Err: errors.New("the item finished before its branch existed: no commit to put its check run on")}
	}
	if u.Status != "" {
		u.Summary = s.page(t, u)
	}
	u.Title, u.Summary, u.Text = fitTitle(u.Title), fitText(u.Summary), fitText(u.Text)
	r := s.gh.Retries()

	runID := dbq.Deref(g.CheckRunID)
	shown := shownOutput{title: orDefault(dbq.Deref(g.CheckTitle), "gitlease"), summary: orDefault(dbq.Deref(g.CheckSummary), "gitlease is tracking this work.")}
	if runID != 0 && row.Attempts > 1 && len(anns) > 0 {
		// An earlier attempt may have written some of them.
		if anns, err = withoutWritten(ctx, r, c, owner, repo, runID, anns); err != nil {
			return err
		}
	}
	first := anns[:min(len(anns), maxAnnotations)]
	rest := anns[len(first):]

	if runID == 0 {
		opts := gh.CreateCheckRunOptions{
			Name: CheckName, HeadSHA: headSHA, ExternalID: gh.String(entry),
			Status: gh.String(orDefault(u.Status, "queued")),
			Output: &gh.CheckRunOutput{
				Title:       gh.String(orDefault(u.Title, "gitlease")),
				Summary:     gh.String(orDefault(u.Summary, "gitlease is tracking this work.")),
				Annotations: first,
			},
		}
		if d := detailsURL(s.cfg.PublicURL, entry); d != "" {
			opts.DetailsURL = gh.String(d)
		}
		if u.Status == "completed" {
			opts.Conclusion = gh.String(u.Conclusion)
		}
		if u.Text != "" {
			opts.Output.Text = gh.String(u.Text)
		}
		if a := actionsFor(u.Status); a != nil && len(*a) > 0 {
			opts.Actions = *a
		}
		run, found, err := createCheckRun(ctx, r, c, owner, repo, opts, row.Attempts > 1, at)
		if err != nil {
			return err
		}
		at.made = true
		runID = run.GetID()
		if err := s.q.GitHubItemSetCheckRun(ctx, s.pool, dbq.GitHubItemSetCheckRunParams{EntryID: w.ID(), CheckRunID: &runID}); err != nil {
			return fmt.Errorf("record check run: %w", err)
		}
		if found {
			// An earlier try created it, maybe with some of these
			// annotations, and this update is still to apply.
			if anns, err = withoutWritten(ctx, r, c, owner, repo, runID, anns); err != nil {
				return err
			}
			if err := s.updateCheckRun(ctx, c, owner, repo, w, runID, &shown, u, anns[:min(len(anns), maxAnnotations)], at); err != nil {
				return err
			}
			rest = anns[min(len(anns), maxAnnotations):]
		} else {
			shown = shownOutput{title: opts.Output.GetTitle(), summary: opts.Output.GetSummary()}
			if err := s.recordShown(ctx, w, shown); err != nil {
				return err
			}
		}
	} else if err := s.updateCheckRun(ctx, c, owner, repo, w, runID, &shown, u, first, at); err != nil {
		return err
	}
	at.made = true
	for len(rest) > 0 {
		chunk := rest[:min(len(rest), maxAnnotations)]
		rest = rest[len(chunk):]
		if err := s.updateCheckRun(ctx, c, owner, repo, w, runID, &shown, checkRunUpdate{}, chunk, at); err != nil {
			return err
		}
	}
	return nil
}

// shownOutput is what a check run shows: GitHub needs its title and
// summary with any output.
type shownOutput struct{ title, summary string }

func (s *Sender) recordShown(ctx context.Context, w queue.Item, o shownOutput) error {
	if err := s.q.GitHubItemSetCheckOutput(ctx, s.pool, dbq.GitHubItemSetCheckOutputParams{EntryID: w.ID(), Title: o.title, Summary: o.summary}); err != nil {
		return fmt.Errorf("record check run output: %w", err)
	}
	return nil
}

// createCheckRun creates a check run, looking for it by external ID first
// when an earlier try's answer may have been lost (retried says an earlier
// attempt of the row was made); found says it existed. It writes GitHub's
// answer down in at.
func createCheckRun(ctx context.Context, r github.Retries, c *gh.Client, owner, repo string, opts gh.CreateCheckRunOptions, retried bool, at *attempt) (*gh.CheckRun, bool, error) {
	found := false
	run, status, err := callStatus(ctx, r, func(lost bool) (*gh.CheckRun, *gh.Response, error) {
		if lost || retried {
			if run, err := findCheckRun(ctx, r, c, owner, repo, opts.HeadSHA, opts.GetExternalID()); err != nil || run != nil {
				found = run != nil
				return run, nil, err
			}
		}
		return c.Checks.CreateCheckRun(ctx, owner, repo, opts)
	})
	if err != nil {
		return nil, false, fmt.Errorf("create check run: %w", err)
	}
	if found {
		at.answered(http.StatusOK, "found check run %d on %s (an earlier try created it)", run.GetID(), opts.HeadSHA)
	} else {
		at.answered(status, "created check run %d on %s (%s)", run.GetID(), opts.HeadSHA, runState(run.GetStatus(), run.GetConclusion()))
	}
	return run, found, nil
}

// runState is a check run's status, with its conclusion once completed.
func runState(status, conclusion string) string {
	if conclusion != "" {
		return status + "/" + conclusion
	}
	return status
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// updateCheckRun moves check run runID to u's state (if any) and adds anns,
// recording what it then shows in *shown. An annotations-only update keeps
// the current title and summary. A retry after a lost answer drops the
// annotations that answer wrote. GitHub's answer is written down in at.
func (s *Sender) updateCheckRun(ctx context.Context, c *gh.Client, owner, repo string, w queue.Item, runID int64, shown *shownOutput, u checkRunUpdate, anns []*gh.CheckRunAnnotation, at *attempt) error {
	if u.Status == "" && len(anns) == 0 {
		return nil
	}
	next := shownOutput{title: orDefault(u.Title, shown.title), summary: orDefault(u.Summary, shown.summary)}
	body := checkRunPatch{UpdateCheckRunOptions: gh.UpdateCheckRunOptions{
		Name:   CheckName,
		Output: &gh.CheckRunOutput{Title: gh.String(next.title), Summary: gh.String(next.summary)},
	}, Actions: actionsFor(u.Status)}
	opts := &body.UpdateCheckRunOptions
	if u.Text != "" {
		opts.Output.Text = gh.String(u.Text)
	}
	if u.Status != "" {
		opts.Status = gh.String(u.Status)
		if u.Status == "completed" {
			opts.Conclusion = gh.String(u.Conclusion)
		}
	}
	r := s.gh.Retries()
	run, status, err := callStatus(ctx, r, func(lost bool) (*gh.CheckRun, *gh.Response, error) {
		if lost && len(anns) > 0 {
			var err error
			if anns, err = withoutWritten(ctx, r, c, owner, repo, runID, anns); err != nil {
				return nil, nil, err
			}
		}
		opts.Output.Annotations = anns
		return patchCheckRun(ctx, c, owner, repo, runID, body)
	})
	if err != nil {
		return fmt.Errorf("update check run %d: %w", runID, err)
	}
	what := fmt.Sprintf("updated check run %d", runID)
	if u.Status != "" {
		what += " (" + runState(run.GetStatus(), run.GetConclusion()) + ")"
	}
	if n := len(opts.Output.Annotations); n > 0 {
		what += fmt.Sprintf(", %d annotation%s", n, plural(n))
	}
	at.answered(status, "%s", what)
	if next != *shown {
		*shown = next
		return s.recordShown(ctx, w, next)
	}
	return nil
}

// findCheckRun finds the item's check run on sha by its external ID, or
// returns nil when there is none.
func findCheckRun(ctx context.Context, r github.Retries, c *gh.Client, owner, repo, sha, externalID string) (*gh.CheckRun, error) {
	opts := &gh.ListCheckRunsOptions{CheckName: gh.String(CheckName), Filter: gh.String("all"), ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		var resp *gh.Response
		res, err := call(ctx, r, func(bool) (*gh.ListCheckRunsResults, *gh.Response, error) {
			res, rr, err := c.Checks.ListCheckRunsForRef(ctx, owner, repo, sha, opts)
			resp = rr
			return res, rr, err
		})
		if err != nil {
			return nil, fmt.Errorf("list check runs: %w", err)
		}
		for _, r := range res.CheckRuns {
			if r.GetExternalID() == externalID {
				return r, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// withoutWritten drops annotations an earlier attempt already wrote.
func withoutWritten(ctx context.Context, r github.Retries, c *gh.Client, owner, repo string, runID int64, anns []*gh.CheckRunAnnotation) ([]*gh.CheckRunAnnotation, error) {
	written := map[string]bool{}
	opts := &gh.ListOptions{PerPage: 100}
	for {
		var resp *gh.Response
		got, err := call(ctx, r, func(bool) ([]*gh.CheckRunAnnotation, *gh.Response, error) {
			got, rr, err := c.Checks.ListCheckRunAnnotations(ctx, owner, repo, runID, opts)
			resp = rr
			return got, rr, err
		})
		if err != nil {
			return nil, fmt.Errorf("list check run annotations: %w", err)
		}
		for _, a := range got {
			var d struct {
				Key string `json:"gitlease_annotation"`
			}
			if json.Unmarshal([]byte(a.GetRawDetails()), &d) == nil && d.Key != "" {
				written[d.Key] = true
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	var keep []*gh.CheckRunAnnotation
	for _, a := range anns {
		var d struct {
			Key string `json:"gitlease_annotation"`
		}
		if json.Unmarshal([]byte(a.GetRawDetails()), &d) != nil || !written[d.Key] {
			keep = append(keep, a)
		}
	}
	return keep, nil
}

// sendStandalone creates a concluded check run on a commit that is not an
// item's, once: a retry looks for its external ID before it creates.
func (s *Sender) sendStandalone(ctx context.Context, row dbq.Outbox, at *attempt) error {
	var sc standaloneCheckRun
	if err := decodePayload(row, &sc); err != nil {
		return err
	}
	c, err := s.gh.Client(sc.InstallationID)
	if err != nil {
		return &github.PermanentError{Err: err}
	}
	owner, repo, _ := strings.Cut(sc.Repository, "/")
	opts := gh.CreateCheckRunOptions{
		Name: CheckName, HeadSHA: sc.HeadSHA, ExternalID: gh.String(sc.ExternalID),
		Status: gh.String("completed"), Conclusion: gh.String(sc.Conclusion),
		Output: &gh.CheckRunOutput{Title: gh.String(fitTitle(sc.Title)), Summary: gh.String(fitText(sc.Summary))},
	}
	_, _, err = createCheckRun(ctx, s.gh.Retries(), c, owner, repo, opts, row.Attempts > 1, at)
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
