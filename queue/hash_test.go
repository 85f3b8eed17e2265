package queue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
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
		canon, err := CanonicalJSON([]byte(tc.text))
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

func TestCanonicalJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		// structure
		{`{"b":1,"a":{"d":[{"z":1,"y":"x"}],"c":null}}`, `{"a":{"c":null,"d":[{"y":"x","z":1}]},"b":1}`},
		{" [ 1 , true , false , null , \"\" , [ ] , { } ] \n", `[1,true,false,null,"",[],{}]`},
		{`{"a":1,"a":2}`, `{"a":2}`}, // the last repeated key wins
		{`{"é":5,"~":6,"Z":3,"":0," ":2,"a":4,"\u0000":1}`, `{"":0,"\u0000":1," ":2,"Z":3,"a":4,"~":6,"é":5}`}, // bytewise
		// strings
		{`"\"\\\/\b\f\n\r\t"`, `"\"\\/\b\f\n\r\t"`},
		{`"\u0000\u0001\u001f\u001F\u007f"`, "\"\\u0000\\u0001\\u001f\\u001f\u007f\""},
		{`"\u000b"`, `"\u000b"`},
		{`"<>&\u2028\u2029"`, "\"<>&\u2028\u2029\""},
		{`"\u003c\u003e\u0026"`, `"<>&"`},
		{`"é€😀"`, `"é€😀"`},
		{`"\u00e9\ud83d\ude00"`, `"é😀"`},
		// integers
		{`0`, `0`},
		{`-1`, `-1`},
		{`18446744073709551615`, `18446744073709551615`},
		{`-9223372036854775808`, `-9223372036854775808`},
		{`123456789012345678`, `123456789012345678`},
		// floats, each checked against serde_json 1.0.87 + ryu
		{`-0`, `-0.0`},
		{`0.0`, `0.0`},
		{`-0.0`, `-0.0`},
		{`-0e5`, `-0.0`},
		{`1.5`, `1.5`},
		{`100.0`, `100.0`},
		{`1e2`, `100.0`},
		{`1E5`, `100000.0`},
		{`1e+5`, `100000.0`},
		{`1e15`, `1000000000000000.0`},
		{`1e16`, `1e16`},
		{`1e21`, `1e21`},
		{`1e22`, `1e22`},
		{`1.5e300`, `1.5e300`},
		{`12.34`, `12.34`},
		{`0.1`, `0.1`},
		{`0.30000000000000004`, `0.30000000000000004`},
		{`0.0001`, `0.0001`},
		{`1e-5`, `0.00001`},
		{`2.5e-5`, `0.000025`},
		{`1234e-6`, `0.001234`},
		{`0.000001`, `1e-6`},
		{`1e-7`, `1e-7`},
		{`5e-324`, `5e-324`},
		{`2e-324`, `0.0`},
		{`1e-400`, `0.0`},
		{`123.456e-789`, `0.0`},
		{`0e999999999999`, `0.0`},
		{`1e-999999999999`, `0.0`},
		{`1.7976931348623157e308`, `1.7976931348623157e308`},
		{`18446744073709551616`, `1.8446744073709552e19`},
		{`-9223372036854775809`, `-9.223372036854776e18`},
		{`12345678901234567890123`, `1.2345678901234568e22`},
		{`184467440737095516150.5`, `1.844674407370955e20`},
		// serde_json's default (not float_roundtrip) parser is off by an ulp here
		{`9007199254740993.0`, `9007199254740994.0`},
		{`-1.95804E-129`, `-1.9580400000000002e-129`},
		{`-0.74466e-18`, `-7.4466000000000005e-19`},
		{`-1.79936554235617451`, `-1.7993655423561743`},
	}
	for _, tc := range tests {
		got, err := CanonicalJSON([]byte(tc.in))
		if err != nil {
			t.Errorf("CanonicalJSON(%s): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("CanonicalJSON(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestCanonicalJSONFloatDriftLikeSerde(t *testing.T) {
	// serde_json (default features) itself prints and re-reads this value
	// differently each time; CanonicalJSON follows it rather than being
	// idempotent on such floats.
	steps := []string{`[18700000122337200000]`, `[1.8700000122337202e19]`, `[1.87000001223372e19]`}
	for i := 0; i+1 < len(steps); i++ {
		got, err := CanonicalJSON([]byte(steps[i]))
		if err != nil || string(got) != steps[i+1] {
			t.Errorf("CanonicalJSON(%s) = %s, %v; want %s", steps[i], got, err, steps[i+1])
		}
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `[1,]`, `{"a":1}{}`, `1 2`, `nul`, `01`, `'a'`,
		"\"\xff\"",             // invalid UTF-8
		`"\ud800"`, `"\udc00"`, // unpaired surrogates
		`"\ud83d\u0041"`, `"\ud83dx"`,
		`1e309`, `-1e309`, `1e999999999999`, // beyond f64
		`18446744073709551616.5`, // serde_json's fast path rejects it
	} {
		got, err := CanonicalJSON([]byte(in))
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("CanonicalJSON(%q) = %s, %v; want *InvalidError", in, got, err)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		vectorA, vectorB,
		`{"b":[1,2.50,-0,1e400],"a":"\u2028<&>"}`,
		`[18446744073709551616, -9223372036854775809, 0.000001, 1e16, 5e-324]`,
		`"\ud83d\ude00\u0001"`,
		`{"a":1,"a":{"c":[],"b":{}}}`,
		`123.456e-789`,
		`[18700000122337200000]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := CanonicalJSON(data)
		if err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("error %T is not *InvalidError: %v", err, err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%q canonicalised to invalid JSON %q", data, out)
		}
		again, err := CanonicalJSON(out)
		if err != nil {
			t.Fatalf("canonical %q rejected: %v", out, err)
		}
		if string(again) == string(out) {
			return
		}
		// serde_json's default float parser is not correctly rounded, so a
		// printed f64 can read back a ulp or two away, in serde_json as here
		// ([18700000122337200000] → [1.8700000122337202e19] →
		// [1.87000001223372e19]). Everything else must be a fixed point.
		if !sameUpToFloatDrift(t, out, again) {
			t.Fatalf("not idempotent: %q then %q", out, again)
		}
	})
}

// sameUpToFloatDrift reports whether two canonical texts differ only in
// float literals that are at most two ulps apart.
func sameUpToFloatDrift(t *testing.T, a, b []byte) bool {
	decode := func(text []byte) any {
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var same func(x, y any) bool
	same = func(x, y any) bool {
		switch x := x.(type) {
		case json.Number:
			y, ok := y.(json.Number)
			if !ok {
				return false
			}
			if x == y {
				return true
			}
			if isIntegerText(string(x)) || isIntegerText(string(y)) {
				return false
			}
			fx, _ := strconv.ParseFloat(string(x), 64)
			fy, _ := strconv.ParseFloat(string(y), 64)
			d := int64(math.Float64bits(fx)) - int64(math.Float64bits(fy))
			return math.Signbit(fx) == math.Signbit(fy) && d >= -2 && d <= 2
		case []any:
			y, ok := y.([]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for i := range x {
				if !same(x[i], y[i]) {
					return false
				}
			}
			return true
		case map[string]any:
			y, ok := y.(map[string]any)
			if !ok || len(x) != len(y) {
				return false
			}
			for k, v := range x {
				if w, ok := y[k]; !ok || !same(v, w) {
					return false
				}
			}
			return true
		default:
			return x == y
		}
	}
	return same(decode(a), decode(b))
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
					if _, ok := canonicalRequest(d, r, ra, e); !ok {
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
		if fast, ok := encodeDispatchFast(d); ok {
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
		if _, ok := canonicalRequest(d, r, nil, nil); !ok {
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
		fast, ok := encodeDispatchFast(d)
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
