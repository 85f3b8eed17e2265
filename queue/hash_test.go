package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The §3.3 vectors.
const (
	vectorA     = `{"dispatch":{"subject":{"id":"1296269#42","kind":"github_issue","labels":["bug"],"metadata":{"installation_id":4242,"number":42},"title":"Upload fails on files over 2 GiB"},"trigger_source":"github:issues.opened","workflow_ref":"coding"},"expire_after_secs":null,"repository":{"base_ref":"refs/heads/main","head_ref":"refs/heads/gitlease/issue-42","repository":"acme/widgets"},"run_at":null}`
	vectorAHash = "c769e1b18e85f7c7d72abc76ea999f991223c7236d5c180e1f951b042385873a"
	vectorB     = `{"dispatch":{"subject":{"Task":{"id":"TASK-7"}},"trigger_source":"manual-queue-enqueue","workflow_ref":"standard"},"expire_after_secs":null,"repository":null,"run_at":null}`
	vectorBHash = "cde21446fef63ab15ecb6363239e7fe495f3ac991523e1fa6884b712f60c803a"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRequestHashVectorsFromCanonicalText(t *testing.T) {
	for _, tc := range []struct{ text, hash string }{{vectorA, vectorAHash}, {vectorB, vectorBHash}} {
		canon, err := canonicalJSON([]byte(tc.text))
		if err != nil {
			t.Fatal(err)
		}
		if string(canon) != tc.text {
			t.Errorf("vector is not canonical:\n got %s\nwant %s", canon, tc.text)
		}
		if got := sha(canon); got != tc.hash {
			t.Errorf("sha256 = %s, want %s", got, tc.hash)
		}
	}
}

func vectorADispatch() SubjectDispatch {
	return SubjectDispatch{
		Subject: &SubjectRef{
			Kind:     "github_issue",
			ID:       "1296269#42",
			Title:    "Upload fails on files over 2 GiB",
			Labels:   []string{"bug"},
			Metadata: json.RawMessage(`{"installation_id": 4242, "number": 42}`),
		},
		WorkflowRef:   "coding",
		TriggerSource: "github:issues.opened",
		RequestedAt:   Timestamp{time.Date(2026, 10, 1, 11, 59, 58, 0, time.UTC)},
	}
}

func vectorAReservation() *Reservation {
	return &Reservation{Repository: "acme/widgets", BaseRef: "refs/heads/main", HeadRef: "refs/heads/gitlease/issue-42"}
}

func vectorBDispatch() SubjectDispatch {
	return SubjectDispatch{
		Subject:       &SubjectRef{Kind: "animus.task", ID: "TASK-7"},
		WorkflowRef:   "standard",
		TriggerSource: "manual-queue-enqueue",
		RequestedAt:   Timestamp{time.Now()},
	}
}

func TestRequestHashVectorsFromGoValues(t *testing.T) {
	got, err := RequestHash(vectorADispatch(), vectorAReservation(), nil, nil)
	if err != nil || got != vectorAHash {
		t.Errorf("vector A: %s, %v; want %s", got, err, vectorAHash)
	}
	got, err = RequestHash(vectorBDispatch(), nil, nil, nil)
	if err != nil || got != vectorBHash {
		t.Errorf("vector B: %s, %v; want %s", got, err, vectorBHash)
	}
}

func TestRequestHashVectorFromWire(t *testing.T) {
	// Entry A exactly as examples/enqueue.json sends it.
	var d SubjectDispatch
	in := `{"subject":{"kind":"github_issue","id":"1296269#42","title":"Upload fails on files over 2 GiB","labels":["bug"],"metadata":{"installation_id":4242,"number":42}},"workflow_ref":"coding","trigger_source":"github:issues.opened","requested_at":"2026-10-01T11:59:58Z"}`
	if err := json.Unmarshal([]byte(in), &d); err != nil {
		t.Fatal(err)
	}
	got, err := RequestHash(d, vectorAReservation(), nil, nil)
	if err != nil || got != vectorAHash {
		t.Errorf("got %s, %v; want %s", got, err, vectorAHash)
	}
}

func TestRequestHashIgnoresRequestedAt(t *testing.T) {
	a := vectorBDispatch()
	b := vectorBDispatch()
	b.RequestedAt = Timestamp{time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := vectorBDispatch()
	c.RequestedAt = Timestamp{time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)} // not even encodable
	ha, _ := RequestHash(a, nil, nil, nil)
	hb, _ := RequestHash(b, nil, nil, nil)
	hc, err := RequestHash(c, nil, nil, nil)
	if err != nil || ha != hb || ha != hc {
		t.Errorf("hashes differ: %s %s %s (%v)", ha, hb, hc, err)
	}
}

func TestRequestHashCoversEverythingElse(t *testing.T) {
	base, err := RequestHash(vectorADispatch(), vectorAReservation(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runAt, runAt2 := "2030-01-01T00:00:00Z", "2030-01-01T00:00:00+00:00"
	secs, zero := uint64(60), uint64(0)
	variants := map[string]func() (string, error){
		"workflow_ref": func() (string, error) {
			d := vectorADispatch()
			d.WorkflowRef = "review"
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"trigger_source": func() (string, error) {
			d := vectorADispatch()
			d.TriggerSource = "x"
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"subject label": func() (string, error) {
			d := vectorADispatch()
			d.Subject.Labels = []string{"bug", "p1"}
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"metadata": func() (string, error) {
			d := vectorADispatch()
			d.Subject.Metadata = json.RawMessage(`{"installation_id":4242,"number":43}`)
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"actor": func() (string, error) {
			d := vectorADispatch()
			d.Actor = &Actor{UserID: "u1"}
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"input": func() (string, error) {
			d := vectorADispatch()
			d.Input = json.RawMessage(`{"k":1}`)
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"vars": func() (string, error) {
			d := vectorADispatch()
			d.Vars = map[string]string{"a": "b"}
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"priority": func() (string, error) {
			d := vectorADispatch()
			d.Priority = "high"
			return RequestHash(d, vectorAReservation(), nil, nil)
		},
		"no reservation": func() (string, error) { return RequestHash(vectorADispatch(), nil, nil, nil) },
		"other head ref": func() (string, error) {
			r := vectorAReservation()
			r.HeadRef = "refs/heads/other"
			return RequestHash(vectorADispatch(), r, nil, nil)
		},
		"run_at":                 func() (string, error) { return RequestHash(vectorADispatch(), vectorAReservation(), &runAt, nil) },
		"run_at same instant":    func() (string, error) { return RequestHash(vectorADispatch(), vectorAReservation(), &runAt2, nil) },
		"expire_after_secs":      func() (string, error) { return RequestHash(vectorADispatch(), vectorAReservation(), nil, &secs) },
		"expire_after_secs zero": func() (string, error) { return RequestHash(vectorADispatch(), vectorAReservation(), nil, &zero) },
	}
	seen := map[string]string{base: "base"}
	for name, fn := range variants {
		h, err := fn()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if other, dup := seen[h]; dup {
			t.Errorf("%s hashes like %s", name, other)
		}
		seen[h] = name
	}
}

func TestRequestHashContent(t *testing.T) {
	// The hashed text, spelled out, for a dispatch using every field.
	d := SubjectDispatch{
		Subject:       &SubjectRef{Kind: "custom", ID: "nightly", Description: "<b> & \u2028"},
		WorkflowRef:   "standard",
		Input:         json.RawMessage(`{"z":[1.50,1e2,"</script>"],"a":null}`),
		Vars:          map[string]string{"b": "2", "a": "1"},
		Priority:      "low",
		TriggerSource: "schedule:nightly",
		RequestedAt:   Timestamp{time.Now()},
		Actor:         &Actor{UserID: "u", Claims: []string{"c"}, TenantID: "t"},
	}
	runAt := "2030-01-01T00:00:00+02:00"
	secs := uint64(3600)
	res := &Reservation{Repository: "acme/widgets", BaseRef: "refs/heads/main", HeadRef: "refs/heads/x"}
	want := `{"dispatch":{"actor":{"claims":["c"],"tenant_id":"t","user_id":"u"},"input":{"a":null,"z":[1.5,100.0,"</script>"]},` +
		`"priority":"low","subject":{"Custom":{"description":"<b> & ` + "\u2028" + `","title":"nightly"}},` +
		`"trigger_source":"schedule:nightly","vars":{"a":"1","b":"2"},"workflow_ref":"standard"},` +
		`"expire_after_secs":3600,"repository":{"base_ref":"refs/heads/main","head_ref":"refs/heads/x","repository":"acme/widgets"},` +
		`"run_at":"2030-01-01T00:00:00+02:00"}`
	got, err := RequestHash(d, res, &runAt, &secs)
	if err != nil {
		t.Fatal(err)
	}
	if got != sha([]byte(want)) {
		t.Errorf("hash %s is not sha256 of\n%s", got, want)
	}
}

func TestRequestHashNullInputIsAbsent(t *testing.T) {
	d := vectorBDispatch()
	d.Input = json.RawMessage(`null`)
	if got, err := RequestHash(d, nil, nil, nil); err != nil || got != vectorBHash {
		t.Errorf("got %s, %v; want %s", got, err, vectorBHash)
	}
}

func TestRequestHashRejectsWhatSerdeRejects(t *testing.T) {
	for _, in := range []string{`{"n":1e400}`, `"\ud800"`, `{"n":18446744073709551616.5}`} {
		d := vectorBDispatch()
		d.Input = json.RawMessage(in)
		_, err := RequestHash(d, nil, nil, nil)
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("input %s: err = %v, want *InvalidError", in, err)
		}
	}
}

// TestRequestHashFastMatchesSlow: the direct canonical writer agrees with
// the encode-decode-encode definition on every shape it takes on.
func TestRequestHashFastMatchesSlow(t *testing.T) {
	exp := uint64(60)
	runAt := "2026-10-01T12:00:00Z"
	res := &Reservation{Repository: "Octo/Repo", BaseRef: "refs/heads/main", HeadRef: "refs/heads/x\u2028<&>"}
	cases := []SubjectDispatch{
		{Subject: &SubjectRef{Kind: "github_issue", ID: "1#2"}, WorkflowRef: "coding", TriggerSource: "t"},
		{Subject: &SubjectRef{Kind: "github_pull_request", ID: "1#3", Title: "t\"\\\b\f\n\r\t\x01", Description: strings.Repeat("é\u2029</script>", 500),
			Labels: []string{"b", "a", ""}, Metadata: json.RawMessage(` {"z":1, "a":[1.50, -0, 1e3, 18446744073709551615], "a":"dup", "s":"\u003c\ud83d\ude00"} `)},
			WorkflowRef: "coding", TriggerSource: "github:pull_request.opened", Priority: "high", RequestedAt: Timestamp{time.Now()}},
		{Subject: &SubjectRef{Kind: "x", ID: "y", Metadata: json.RawMessage(`{ }`)}, WorkflowRef: "w"},
		{Subject: &SubjectRef{Kind: "x", ID: "y", Metadata: json.RawMessage(`null`)}, WorkflowRef: "w"},
		{Subject: &SubjectRef{Kind: "x", ID: "y", Metadata: json.RawMessage(`[1,{"b":2,"a":1}]`)}, WorkflowRef: "w"},
	}
	for i, d := range cases {
		for _, r := range []*Reservation{nil, res} {
			for _, ra := range []*string{nil, &runAt} {
				for _, e := range []*uint64{nil, &exp} {
					if _, _, ok := encodeFast(d, r, ra, e); !ok {
						t.Fatalf("case %d: not taken by the direct writer", i)
					}
					fast, err1 := RequestHash(d, r, ra, e)
					slow, err2 := requestHashSlow(d, r, ra, e)
					if err1 != nil || err2 != nil || fast != slow {
						t.Fatalf("case %d: direct %s %v, by the wire form %s %v", i, fast, err1, slow, err2)
					}
				}
			}
		}
	}
}

// FuzzRequestHashFast: whatever text a dispatch holds, the direct writer
// and the wire-form definition give the same hash or the direct writer
// declines, and the one-pass dispatch encoder writes json.Marshal's value or
// declines.
func FuzzRequestHashFast(f *testing.F) {
	f.Add("github_issue", "1#2", "title", "body \u2028 <", "label", `{"a":1}`, "refs/heads/x")
	f.Add("custom", "", "", "\xff", "", `null`, "")
	f.Add("k", "i", "", "", "", `{"x":[1e400]}`, "r")
	f.Fuzz(func(t *testing.T, kind, id, title, desc, label, meta, head string) {
		d := SubjectDispatch{Subject: &SubjectRef{Kind: kind, ID: id, Title: title, Description: desc, Labels: []string{label}, Metadata: json.RawMessage(meta)},
			WorkflowRef: "coding", TriggerSource: "fuzz"}
		r := &Reservation{Repository: "o/r", BaseRef: "refs/heads/main", HeadRef: head}
		if fast, _, ok := encodeFast(d, r, nil, nil); ok {
			std, err := json.Marshal(d)
			value := func(b []byte) (v any) {
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.UseNumber()
				if dec.Decode(&v) != nil {
					return "invalid"
				}
				return v
			}
			if err != nil || !reflect.DeepEqual(value(fast), value(std)) {
				t.Fatalf("one-pass dispatch %s, json.Marshal %s %v", fast, std, err)
			}
		}
		if _, _, ok := encodeFast(d, r, nil, nil); !ok {
			return
		}
		fast, err1 := RequestHash(d, r, nil, nil)
		slow, err2 := requestHashSlow(d, r, nil, nil)
		if (err1 == nil) != (err2 == nil) || fast != slow {
			t.Fatalf("direct %s %v, by the wire form %s %v", fast, err1, slow, err2)
		}
	})
}

// TestEncodeDispatchMatchesMarshal: the one-pass dispatch encoder writes the
// JSON value json.Marshal writes (the stored jsonb is the same).
func TestEncodeDispatchMatchesMarshal(t *testing.T) {
	decode := func(b []byte) any {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return v
	}
	at := Timestamp{time.Date(2026, 10, 1, 12, 0, 0, 123456000, time.UTC)}
	for i, d := range []SubjectDispatch{
		{Subject: &SubjectRef{Kind: "github_issue", ID: "1#2"}, WorkflowRef: "coding", TriggerSource: "t", RequestedAt: at},
		{Subject: &SubjectRef{Kind: "github_pull_request", ID: "1#3", Title: "t\"\\\b\f\n\r\t\x01<&>", Description: strings.Repeat("é\u2029</script>", 500),
			Labels: []string{"b", "a"}, Metadata: json.RawMessage(` {"z":1, "a":[1.50, -0, 1e3], "s":"\u003c"} `)},
			WorkflowRef: "coding", TriggerSource: "github:pull_request.opened", Priority: "high", RequestedAt: at},
		{Subject: &SubjectRef{Kind: "x", ID: "y", Metadata: json.RawMessage(`{ }`)}, WorkflowRef: "w"},
	} {
		fast, _, ok := encodeFast(d, nil, nil, nil)
		if !ok {
			t.Fatalf("case %d: not taken by the one-pass encoder", i)
		}
		std, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := decode(fast), decode(std); !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d:\n%s\nwant the value of\n%s", i, fast, std)
		}
	}
}
