package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/google/uuid"
	"sort"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// seed is a fixture as a fuzz seed: compact, and without the API URLs,
// node IDs, links and reactions gitlease never reads. The fuzzer minimizes
// every input that finds new code, which takes it minutes on a 20 KB pull
// request payload and leaves a 10 s run nearly no time to fuzz.
func seed(tb testing.TB, body []byte) []byte {
	tb.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		tb.Fatal(err)
	}
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if (strings.HasSuffix(k, "url") && k != "html_url") || k == "_links" || k == "reactions" || k == "node_id" || k == "gravatar_id" {
					delete(x, k)
					continue
				}
				x[k] = strip(e)
			}
		case []any:
			for i, e := range x {
				x[i] = strip(e)
			}
		}
		return v
	}
	out, err := json.Marshal(strip(v))
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// FuzzVerify: the signature check never panics, a body signed with a
// configured secret always verifies with that secret's index, and changing
// one byte of the body or of the signature makes it fail.
func FuzzVerify(f *testing.F) {
	fixtures := allPayloads(f)
	names := make([]string, 0, len(fixtures))
	for name := range fixtures {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		f.Add(seed(f, fixtures[name]), testSecrets[i%2], uint(i*7919), "sha256=00")
	}
	f.Add([]byte{}, "s", uint(0), "")
	f.Add([]byte("payload=%7B%7D"), "x", uint(3), "sha1=abcd")
	f.Fuzz(func(t *testing.T, body []byte, secret string, pos uint, junk string) {
		if secret == "" {
			if _, err := webhook.NewVerifier(secret); err == nil {
				t.Fatal("an empty secret was accepted")
			}
			return
		}
		other := secret + "-old"
		v, err := webhook.NewVerifier(other, secret)
		if err != nil {
			t.Fatal(err)
		}
		// Arbitrary header values never panic and never verify unless
		// they are the right signature.
		if i, err := v.Verify(junk, body); err == nil && junk != webhook.Sign([]byte(secret), body) && junk != webhook.Sign([]byte(other), body) {
			t.Fatalf("junk signature %q verified as %d", junk, i)
		}

		sig := webhook.Sign([]byte(secret), body)
		if i, err := v.Verify(sig, body); err != nil || i != 1 {
			t.Fatalf("valid signature: index %d, %v", i, err)
		}
		if i, err := v.Verify(webhook.Sign([]byte(other), body), body); err != nil || i != 0 {
			t.Fatalf("valid signature with the first secret: index %d, %v", i, err)
		}
		if len(body) > 0 {
			flipped := append([]byte(nil), body...)
			flipped[pos%uint(len(body))] ^= 1 << (pos % 8)
			if _, err := v.Verify(sig, flipped); !errors.Is(err, webhook.ErrSignatureMismatch) {
				t.Fatalf("flipped body byte %d verified: %v", pos%uint(len(body)), err)
			}
		}
		// Change one hex digit of the MAC (after "sha256=").
		b := []byte(sig)
		at := len("sha256=") + int(pos%64)
		if b[at] == '0' {
			b[at] = '1'
		} else {
			b[at] = '0'
		}
		if _, err := v.Verify(string(b), body); !errors.Is(err, webhook.ErrSignatureMismatch) {
			t.Fatalf("altered signature verified: %v", err)
		}
	})
}

// anyPRs answers every lookup with the fixture's pull request renumbered,
// so the mapper's comment path is fuzzed too.
type anyPRs struct{ pr github.PullRequest }

func (a anyPRs) PullRequest(_ context.Context, _ int64, _, _ string, number int) (*github.PullRequest, error) {
	pr := a.pr
	pr.Number = &number
	return &pr, nil
}

// FuzzMapper: the mapper never panics on any event name and body, fails
// only with a *PayloadError, and every enqueue it decides is a valid queue
// request keyed by the delivery ID.
func FuzzMapper(f *testing.F) {
	for name, body := range allPayloads(f) {
		f.Add(eventOf(name), seed(f, body))
	}
	f.Add("issues", []byte(`{"action":"opened","issue":{"number":1},"repository":{"id":1,"full_name":"a/b","default_branch":"main"}}`))
	f.Add("pull_request", []byte(`{"action":"opened","pull_request":{"number":2,"head":{"ref":"x","sha":"y"},"base":{"ref":"main"}},"repository":{"id":1,"full_name":"a/b"}}`))
	f.Add("issue_comment", []byte(`{"action":"created","comment":{"body":"/gitlease run","author_association":"OWNER"},"issue":{"number":3,"pull_request":{}},"repository":{"id":1,"full_name":"a/b"},"installation":{"id":5}}`))
	f.Add("issue_comment", []byte(`{"action":"created","comment":{"body":"/gitlease cancel now","author_association":"MEMBER"},"issue":{"number":3},"repository":{"id":1,"full_name":"a/b"},"sender":{"login":"o"}}`))
	f.Add("check_run", []byte(`{"action":"requested_action","requested_action":{"identifier":"cancel"},"check_run":{"id":9,"external_id":"8f1c2d6e-0000-4000-8000-000000000000","app":{"id":424242}},"repository":{"id":1},"installation":{"id":5},"sender":{"login":"o"}}`))
	f.Add("check_run", []byte(`{"action":"requested_action","requested_action":null,"check_run":{"id":"9","app":{"id":424242}},"repository":{"id":1}}`))
	f.Add("issues", []byte(`null`))
	f.Add("ping", []byte(`{"hook":7}`))
	f.Add("", []byte(`{}`))

	f.Add("issues", []byte(`{"action":"opened","issue":{"number":1,"author_association":"MANNEQUIN"},"repository":{"id":1,"full_name":"a/b","default_branch":"main"}}`))
	f.Add("issue_comment", []byte(`{"action":"created","comment":{"body":"/gitlease run","author_association":"mannequin"},"issue":{"number":3,"author_association":"NONE"},"repository":{"id":1,"full_name":"a/b","default_branch":"main"}}`))

	prs := anyPRs{pr: *newFakePRs(f).pr}
	mannequins, err := webhook.ParseAllowedAuthors("MANNEQUIN")
	if err != nil {
		f.Fatal(err)
	}
	mappers := make([]*webhook.Mapper, 0, 3)
	for _, cfg := range []webhook.MapperConfig{
		{BranchPrefix: "gitlease/", BotLogin: botLogin, AppID: 424242}, // the fixtures' App: Re-runs are acted on
		{BranchPrefix: "", TriggerLabel: "gitlease"},
		{BranchPrefix: "x/", AllowedAuthors: mannequins}, // last: the author check below applies to it
	} {
		m, err := webhook.NewMapper(prs, cfg)
		if err != nil {
			f.Fatal(err)
		}
		mappers = append(mappers, m)
	}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		for i, m := range mappers {
			dec, err := m.Map(context.Background(), event, "fuzz-delivery", body)
			var perr *webhook.PayloadError
			if err != nil {
				if !errors.As(err, &perr) {
					t.Fatalf("error %T %v, want *PayloadError", err, err)
				}
				continue
			}
			switch dec.Kind {
			case webhook.KindEnqueue:
				p := dec.Enqueue
				if p.IdempotencyKey != "fuzz-delivery" || p.Reservation == nil || p.Dispatch.Subject == nil {
					t.Fatalf("enqueue %+v", p)
				}
				if err := queue.ValidateReservation(*p.Reservation); err != nil {
					t.Fatalf("invalid reservation %+v: %v", *p.Reservation, err)
				}
				q, err := queue.CanonicalID(p.Dispatch.Subject.Kind, p.Dispatch.Subject.ID)
				if err != nil || q != dec.QualifiedID {
					t.Fatalf("qualified id %q vs %q: %v", q, dec.QualifiedID, err)
				}
				if _, err := queue.RequestHash(p.Dispatch, p.Reservation, nil, nil); err != nil {
					t.Fatalf("dispatch does not hash: %v", err)
				}
				if i == len(mappers)-1 {
					if assoc := authorOf(event, body); !strings.EqualFold(assoc, "MANNEQUIN") {
						t.Fatalf("enqueued for author association %q, only MANNEQUIN allowed", assoc)
					}
				}
			case webhook.KindCancel:
				if c := dec.CheckRun; c != nil {
					if _, err := uuid.Parse(c.EntryID); err != nil || c.CheckRunID <= 0 || dec.CancelReason == "" {
						t.Fatalf("cancel button press %+v (%q)", c, dec.CancelReason)
					}
				} else if _, _, ok := queue.SplitQualifiedID(dec.QualifiedID); !ok || dec.CancelReason == "" {
					t.Fatalf("cancel of %q (%q)", dec.QualifiedID, dec.CancelReason)
				}
			case webhook.KindIgnore:
				if dec.Reason == "" {
					t.Fatal("ignored without a reason")
				}
			}
		}
	})
}

// authorOf is the association that decides who may start work, read from
// body apart from the mapper: the comment's for a comment command, else the
// issue's or pull request's.
func authorOf(event string, body []byte) string {
	var p map[string]any
	if jsonv2.Unmarshal(bytes.TrimSpace(body), &p, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) != nil {
		return ""
	}
	part := map[string]string{"issues": "issue", "pull_request": "pull_request", "issue_comment": "comment"}[event]
	o, _ := p[part].(map[string]any)
	s, _ := o["author_association"].(string)
	return strings.ReplaceAll(s, "\x00", "")
}

// FuzzDecodeBody: any content type and body either decodes to the payload
// or fails with the typed payload error (a 400), never a panic; a JSON body
// sent form-encoded decodes to the same payload.
func FuzzDecodeBody(f *testing.F) {
	f.Add("application/json", []byte(`{"zen":"Keep it logically awesome."}`))
	f.Add("application/x-www-form-urlencoded", []byte(`payload=%7B%22zen%22%3A%22x%22%7D`))
	f.Add("application/x-www-form-urlencoded; charset=utf-8", []byte(`payload=`))
	f.Add("text/plain", []byte(`{}`))
	f.Add("", []byte(``))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		payload, err := webhook.DecodeBody(contentType, body)
		var pe *webhook.PayloadError
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("DecodeBody(%q) failed with %T %v, want *webhook.PayloadError", contentType, err, err)
		}
		if err == nil && len(payload) > len(body) {
			t.Fatalf("payload of %d bytes from a %d-byte body", len(payload), len(body))
		}
	})
}

// FuzzLenientParse: whatever valid JSON stands in fields gitlease does not
// use (a timestamp, the author, a new field) of an event it acts on, and
// whatever an event it does not act on carries beyond its envelope, the
// decision is the same as for the fixture itself (docs/webhook.md).
func FuzzLenientParse(f *testing.F) {
	for _, v := range []string{`1700000000`, `"2023-11-14 22:13:20 +0000"`, `null`, `{"a":[1,2]}`, `"\u0000"`, `-1e309`, `true`} {
		f.Add(v)
	}
	m, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: "gitlease/"})
	if err != nil {
		f.Fatal(err)
	}
	fixtures := map[string][]byte{}
	for _, name := range []string{"issues-opened", "pull_request-opened", "issue_comment-created", "star-created"} {
		fixtures[name] = seed(f, payload(f, name))
	}
	f.Fuzz(func(t *testing.T, value string) {
		if !json.Valid([]byte(value)) {
			return
		}
		for name, body := range fixtures {
			event := eventOf(name)
			want, err := m.Map(context.Background(), event, "fuzz-delivery", body)
			if err != nil {
				t.Fatalf("%s as is: %v", name, err)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			doc["field_added_later"] = json.RawMessage(value)
			for _, part := range []string{"issue", "pull_request", "comment", "starred_at"} {
				var obj map[string]json.RawMessage
				if json.Unmarshal(doc[part], &obj) != nil || obj == nil {
					if _, ok := doc[part]; ok && event == "star" {
						doc[part] = json.RawMessage(value)
					}
					continue
				}
				obj["user"], obj["reactions"] = json.RawMessage(value), json.RawMessage(value)
				if part != "comment" { // a comment's created_at is its command's requested_at
					obj["created_at"] = json.RawMessage(value)
				}
				b, _ := json.Marshal(obj)
				doc[part] = b
			}
			varied, _ := json.Marshal(doc)
			got, err := m.Map(context.Background(), event, "fuzz-delivery", varied)
			if err != nil {
				t.Fatalf("%s with %s in unused fields: %v", name, value, err)
			}
			if got.Kind != want.Kind || got.QualifiedID != want.QualifiedID || got.Reason != want.Reason {
				t.Fatalf("%s with %s in unused fields: %v %q %q, want %v %q %q", name, value, got.Kind, got.QualifiedID, got.Reason, want.Kind, want.QualifiedID, want.Reason)
			}
			if got.Kind == webhook.KindEnqueue {
				gh, _ := queue.RequestHash(got.Enqueue.Dispatch, got.Enqueue.Reservation, nil, nil)
				wh, _ := queue.RequestHash(want.Enqueue.Dispatch, want.Enqueue.Reservation, nil, nil)
				if gh != wh {
					t.Fatalf("%s with %s in unused fields: another dispatch", name, value)
				}
			}
		}
	})
}
