package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"

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
	f.Add("issues", []byte(`null`))
	f.Add("ping", []byte(`{"hook":7}`))
	f.Add("", []byte(`{}`))

	prs := anyPRs{pr: *newFakePRs(f).pr}
	mappers := make([]*webhook.Mapper, 0, 2)
	for _, cfg := range []webhook.MapperConfig{
		{BranchPrefix: "gitlease/", BotLogin: botLogin, AppID: 424242}, // the fixtures' App: Re-runs are acted on
		{BranchPrefix: "", TriggerLabel: "gitlease"},
	} {
		m, err := webhook.NewMapper(prs, cfg)
		if err != nil {
			f.Fatal(err)
		}
		mappers = append(mappers, m)
	}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		for _, m := range mappers {
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
			case webhook.KindCancel:
				if _, _, ok := queue.SplitQualifiedID(dec.QualifiedID); !ok {
					t.Fatalf("cancel of %q", dec.QualifiedID)
				}
			case webhook.KindIgnore:
				if dec.Reason == "" {
					t.Fatal("ignored without a reason")
				}
			}
		}
	})
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
