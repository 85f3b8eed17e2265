package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/db/dbq"
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

// sendCheckRun brings an item's check run to the row's state: created if
// absent (found again by external_id after a lost response), then updated,
// annotations added at most 50 per request and never twice.
func (s *Sender) sendCheckRun(ctx context.Context, row dbq.Outbox) error {
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
	entry := w.ID.String()
	anns := toGitHub(row.ID, u.Annotations)
	headSHA := deref(g.HeadSha) // an issue item's branch head
	if headSHA == "" {
		headSHA = m.HeadSHA // a pull request's head, as delivered
	}
	if headSHA == "" {
		return &permanentError{errors.New("the item finished before its branch existed: no commit to put its check run on")}
	}

	var run *gh.CheckRun
	if g.CheckRunID != nil {
		run, _, err = c.Checks.GetCheckRun(ctx, owner, repo, *g.CheckRunID)
		if err != nil {
			return fmt.Errorf("get check run: %w", err)
		}
	} else if run, err = findCheckRun(ctx, c, owner, repo, headSHA, entry); err != nil {
		return err
	}
	if run != nil && row.Attempts > 1 && len(anns) > 0 {
		if anns, err = withoutWritten(ctx, c, owner, repo, run.GetID(), anns); err != nil {
			return err
		}
	}
	first := anns[:min(len(anns), maxAnnotations)]
	rest := anns[len(first):]

	if run == nil {
		opts := gh.CreateCheckRunOptions{
			Name: CheckName, HeadSHA: headSHA, ExternalID: gh.String(entry),
			Status: gh.String(orDefault(u.Status, "queued")),
			Output: &gh.CheckRunOutput{
				Title:       gh.String(orDefault(u.Title, "gitlease")),
				Summary:     gh.String(orDefault(u.Summary, "gitlease is tracking this work.")),
				Annotations: first,
			},
		}
		if u.Status == "completed" {
			opts.Conclusion = gh.String(u.Conclusion)
		}
		if u.Text != "" {
			opts.Output.Text = gh.String(u.Text)
		}
		if run, _, err = c.Checks.CreateCheckRun(ctx, owner, repo, opts); err != nil {
			return fmt.Errorf("create check run: %w", err)
		}
		if err := s.q.GitHubItemSetCheckRun(ctx, s.pool, dbq.GitHubItemSetCheckRunParams{EntryID: w.ID, CheckRunID: run.ID}); err != nil {
			return fmt.Errorf("record check run: %w", err)
		}
	} else {
		if g.CheckRunID == nil {
			if err := s.q.GitHubItemSetCheckRun(ctx, s.pool, dbq.GitHubItemSetCheckRunParams{EntryID: w.ID, CheckRunID: run.ID}); err != nil {
				return fmt.Errorf("record check run: %w", err)
			}
		}
		if err := updateCheckRun(ctx, c, owner, repo, run, u, first); err != nil {
			return err
		}
	}
	for len(rest) > 0 {
		chunk := rest[:min(len(rest), maxAnnotations)]
		rest = rest[len(chunk):]
		if err := updateCheckRun(ctx, c, owner, repo, run, checkRunUpdate{}, chunk); err != nil {
			return err
		}
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// updateCheckRun moves run to u's state (if any) and adds anns. GitHub
// needs a title and summary with any output; an annotations-only update
// keeps the current ones.
func updateCheckRun(ctx context.Context, c *gh.Client, owner, repo string, run *gh.CheckRun, u checkRunUpdate, anns []*gh.CheckRunAnnotation) error {
	if u.Status == "" && len(anns) == 0 {
		return nil
	}
	out := run.GetOutput()
	opts := gh.UpdateCheckRunOptions{
		Name: CheckName,
		Output: &gh.CheckRunOutput{
			Title:       gh.String(orDefault(u.Title, orDefault(out.GetTitle(), "gitlease"))),
			Summary:     gh.String(orDefault(u.Summary, orDefault(out.GetSummary(), "gitlease is tracking this work."))),
			Annotations: anns,
		},
	}
	if u.Text != "" {
		opts.Output.Text = gh.String(u.Text)
	}
	if u.Status != "" {
		opts.Status = gh.String(u.Status)
		if u.Status == "completed" {
			opts.Conclusion = gh.String(u.Conclusion)
		}
	}
	updated, _, err := c.Checks.UpdateCheckRun(ctx, owner, repo, run.GetID(), opts)
	if err != nil {
		return fmt.Errorf("update check run %d: %w", run.GetID(), err)
	}
	*run = *updated
	return nil
}

// findCheckRun finds the item's check run on sha by its external ID, or
// returns nil when there is none.
func findCheckRun(ctx context.Context, c *gh.Client, owner, repo, sha, externalID string) (*gh.CheckRun, error) {
	opts := &gh.ListCheckRunsOptions{CheckName: gh.String(CheckName), Filter: gh.String("all"), ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		res, resp, err := c.Checks.ListCheckRunsForRef(ctx, owner, repo, sha, opts)
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
func withoutWritten(ctx context.Context, c *gh.Client, owner, repo string, runID int64, anns []*gh.CheckRunAnnotation) ([]*gh.CheckRunAnnotation, error) {
	written := map[string]bool{}
	opts := &gh.ListOptions{PerPage: 100}
	for {
		got, resp, err := c.Checks.ListCheckRunAnnotations(ctx, owner, repo, runID, opts)
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
// item's, unless one with its external ID exists already.
func (s *Sender) sendStandalone(ctx context.Context, row dbq.Outbox) error {
	var sc standaloneCheckRun
	if err := decodePayload(row, &sc); err != nil {
		return err
	}
	c, err := s.gh.Client(sc.InstallationID)
	if err != nil {
		return &permanentError{err}
	}
	owner, repo, _ := strings.Cut(sc.Repository, "/")
	if run, err := findCheckRun(ctx, c, owner, repo, sc.HeadSHA, sc.ExternalID); err != nil || run != nil {
		return err
	}
	_, _, err = c.Checks.CreateCheckRun(ctx, owner, repo, gh.CreateCheckRunOptions{
		Name: CheckName, HeadSHA: sc.HeadSHA, ExternalID: gh.String(sc.ExternalID),
		Status: gh.String("completed"), Conclusion: gh.String(sc.Conclusion),
		Output: &gh.CheckRunOutput{Title: gh.String(sc.Title), Summary: gh.String(sc.Summary)},
	})
	if err != nil {
		return fmt.Errorf("create check run: %w", err)
	}
	return nil
}
