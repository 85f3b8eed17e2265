package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/webhook"
)

func testGenerator(t *testing.T) *generator {
	t.Helper()
	g, err := newGenerator(7, "abcd1234", 1<<40, 4, DefaultBodySize)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestFixturesMatchTestdata(t *testing.T) {
	entries, err := fixtures.ReadDir("payloads")
	if err != nil || len(entries) == 0 {
		t.Fatalf("embedded fixtures: %v (%d)", err, len(entries))
	}
	for _, e := range entries {
		embedded, _ := fixtures.ReadFile("payloads/" + e.Name())
		original, err := os.ReadFile(filepath.Join("..", "..", "testdata", "payloads", e.Name()))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if !bytes.Equal(embedded, original) {
			t.Errorf("payloads/%s differs from testdata/payloads/%s: copy it again", e.Name(), e.Name())
		}
	}
}

// TestBodies renders every kind of delivery and checks it is the JSON
// GitHub sends for its event (go-github parses it), about 20 KB, and what
// gitlease's own mapper makes the intended subject and reservation of.
func TestBodies(t *testing.T) {
	g := testGenerator(t)
	mapper, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []delivery{
		{ID: "d1", Kind: issueOpened, Repo: 1, Number: 5},
		{ID: "d2", Kind: prOpened, Repo: 2, Number: 6},
		{ID: "d3", Kind: issueCommand, Repo: 1, Number: 5},
		{ID: "d4", Kind: prSynchronize, Repo: 2, Number: 6, Rev: 3},
		{ID: "d5", Kind: prOpened, Repo: 3, Number: 1234567},
	} {
		t.Run(d.Kind.String()+"/"+d.ID, func(t *testing.T) {
			body := g.body(d)
			if !json.Valid(body) {
				t.Fatalf("not valid JSON: %.200s", body)
			}
			if n := len(body); n < 19<<10 || n > 23<<10 {
				t.Errorf("body is %d bytes, want about 20 KiB", n)
			}
			parsed, err := github.ParseWebHook(d.Kind.event(), body)
			if err != nil {
				t.Fatalf("go-github does not parse it as %s: %v", d.Kind.event(), err)
			}
			var repo *github.Repository
			switch ev := parsed.(type) {
			case *github.IssuesEvent:
				repo = ev.GetRepo()
				if ev.GetAction() != "opened" || ev.GetIssue().GetNumber() != d.Number {
					t.Errorf("issues event: action %q number %d", ev.GetAction(), ev.GetIssue().GetNumber())
				}
				if len(ev.GetIssue().GetBody()) < 10<<10 {
					t.Errorf("issue body not padded: %d bytes", len(ev.GetIssue().GetBody()))
				}
			case *github.IssueCommentEvent:
				repo = ev.GetRepo()
				if ev.GetIssue().GetNumber() != d.Number || ev.GetComment().GetAuthorAssociation() != "OWNER" {
					t.Errorf("comment event: number %d author %q", ev.GetIssue().GetNumber(), ev.GetComment().GetAuthorAssociation())
				}
			case *github.PullRequestEvent:
				repo = ev.GetRepo()
				pr := ev.GetPullRequest()
				if ev.GetNumber() != d.Number || pr.GetNumber() != d.Number {
					t.Errorf("pull request numbers %d, %d; want %d", ev.GetNumber(), pr.GetNumber(), d.Number)
				}
				if got, want := pr.GetHead().GetRef(), headRef(d.Number); got != want {
					t.Errorf("head ref %q, want %q", got, want)
				}
				if got, want := pr.GetHead().GetSHA(), g.headSHA(d, d.Rev); got != want {
					t.Errorf("head sha %q, want %q", got, want)
				}
				if pr.GetHead().GetRepo().GetID() != repo.GetID() || pr.GetBase().GetRepo().GetID() != repo.GetID() {
					t.Errorf("head and base repository ids %d, %d differ from the repository's %d",
						pr.GetHead().GetRepo().GetID(), pr.GetBase().GetRepo().GetID(), repo.GetID())
				}
				if d.Kind == prSynchronize && (ev.GetAfter() != g.headSHA(d, d.Rev) || ev.GetBefore() != g.headSHA(d, d.Rev-1)) {
					t.Errorf("synchronize before %s after %s", ev.GetBefore(), ev.GetAfter())
				}
			default:
				t.Fatalf("parsed as %T", parsed)
			}
			if repo.GetID() != g.repoID(d.Repo) || repo.GetFullName() != g.fullName(d.Repo) || repo.GetName() != g.repoName(d.Repo) {
				t.Errorf("repository %d %q %q, want %d %q", repo.GetID(), repo.GetFullName(), repo.GetName(), g.repoID(d.Repo), g.fullName(d.Repo))
			}

			dec, err := mapper.Map(context.Background(), d.Kind.event(), d.ID, body)
			if err != nil {
				t.Fatalf("mapper: %v", err)
			}
			if dec.Kind != webhook.KindEnqueue {
				t.Fatalf("mapper decided %s (%s), want enqueue", dec.Kind, dec.Reason)
			}
			kind := webhook.KindIssue
			wantHead := "refs/heads/gitlease/issue-" + strconv.Itoa(d.Number)
			if d.Kind.isPR() {
				kind, wantHead = webhook.KindPullRequest, "refs/heads/"+headRef(d.Number)
			}
			if want := webhook.QualifiedID(kind, g.repoID(d.Repo), d.Number); dec.QualifiedID != want {
				t.Errorf("subject %s, want %s", dec.QualifiedID, want)
			}
			res := dec.Enqueue.Reservation
			if res == nil || res.Repository != g.fullName(d.Repo) || res.HeadRef != wantHead {
				t.Errorf("reservation %+v, want %s %s", res, g.fullName(d.Repo), wantHead)
			}
		})
	}
}

// TestBodiesDeterministic: a redelivery re-renders the same bytes, and
// different subjects differ.
func TestBodiesDeterministic(t *testing.T) {
	g := testGenerator(t)
	d := delivery{ID: "x", Kind: prOpened, Repo: 1, Number: 42}
	if !bytes.Equal(g.body(d), g.body(d)) {
		t.Error("rendering one delivery twice gave different bodies")
	}
	other := d
	other.Number = 43
	if bytes.Equal(g.body(d), g.body(other)) {
		t.Error("two pull requests rendered the same body")
	}
	g2, err := newGenerator(7, "abcd1234", 1<<40, 4, DefaultBodySize)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.body(d), g2.body(d)) {
		t.Error("the same seed made different bodies")
	}
}

func TestSignedRequest(t *testing.T) {
	body := []byte(`{"zen":"x"}`)
	req, err := newDeliveryRequest(context.Background(), "http://127.0.0.1:1/webhook", "It's a Secret to Everybody", "ping", "id-1", body)
	if err != nil {
		t.Fatal(err)
	}
	// The example from GitHub's documentation on validating deliveries.
	if got, want := webhook.Sign([]byte("It's a Secret to Everybody"), []byte("Hello, World!")),
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("Sign = %s, want GitHub's %s", got, want)
	}
	v, err := webhook.NewVerifier("other", "It's a Secret to Everybody")
	if err != nil {
		t.Fatal(err)
	}
	if i, err := v.Verify(req.Header.Get(webhook.SignatureHeader), body); err != nil || i != 1 {
		t.Errorf("Verify = %d, %v; want secret 1", i, err)
	}
	for h, want := range map[string]string{
		webhook.EventHeader: "ping", webhook.DeliveryHeader: "id-1", "Content-Type": webhook.ContentTypeJSON,
	} {
		if got := req.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
}

// fullName is "octocat/<name>" of repository index i, as the fixtures name
// a repository.
func (g *generator) fullName(i int) string { return "octocat/" + g.repoName(i) }

// headRef is the head branch (without refs/heads/) of pull request number.
func headRef(number int) string { return headRefPrefix + strconv.Itoa(number) }
