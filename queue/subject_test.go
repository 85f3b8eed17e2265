package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSubjectRefUnmarshal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want SubjectRef
	}{
		{"tagged task", `{"Task":{"id":"TASK-7"}}`, SubjectRef{Kind: "animus.task", ID: "TASK-7"}},
		{"tagged requirement", `{"Requirement":{"id":"REQ-1"}}`, SubjectRef{Kind: "animus.requirement", ID: "REQ-1"}},
		{"tagged custom", `{"Custom":{"title":"nightly","description":"run it"}}`,
			SubjectRef{Kind: "custom", ID: "nightly", Title: "nightly", Description: "run it"}},
		{"tagged with unknown inner field", `{"Task":{"id":"T","extra":1}}`, SubjectRef{Kind: "animus.task", ID: "T"}},
		{"flat minimal", `{"kind":"github_issue","id":"1296269#42"}`, SubjectRef{Kind: "github_issue", ID: "1296269#42"}},
		{"flat full", `{"kind":"github_issue","id":"1296269#42","title":"Upload fails","description":"d","labels":["bug","p1"],"metadata":{"number":42}}`,
			SubjectRef{Kind: "github_issue", ID: "1296269#42", Title: "Upload fails", Description: "d",
				Labels: []string{"bug", "p1"}, Metadata: json.RawMessage(`{"number":42}`)}},
		{"flat builtin kind", `{"kind":"animus.task","id":"TASK-7"}`, SubjectRef{Kind: "animus.task", ID: "TASK-7"}},
		{"flat null optionals", `{"kind":"k","id":"i","title":null,"description":null,"labels":null,"metadata":null}`,
			SubjectRef{Kind: "k", ID: "i"}},
		{"flat empty metadata", `{"kind":"k","id":"i","metadata":{ }}`, SubjectRef{Kind: "k", ID: "i"}},
		{"flat non-object metadata", `{"kind":"k","id":"i","metadata":[1]}`, SubjectRef{Kind: "k", ID: "i", Metadata: json.RawMessage(`[1]`)}},
		{"flat unknown fields dropped", `{"kind":"k","id":"i","surprise":true,"Kind":"x"}`, SubjectRef{Kind: "k", ID: "i"}},
		{"flat empty strings", `{"kind":"","id":""}`, SubjectRef{}},
		// two members: not the tagged form even if one is a tag
		{"tag plus flat fields", `{"Task":{"id":"T"},"kind":"k","id":"i"}`, SubjectRef{Kind: "k", ID: "i"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got SubjectRef
			if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Unmarshal(%s) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}

func TestSubjectRefUnmarshalRejects(t *testing.T) {
	for _, in := range []string{
		`"Task"`,
		`[]`,
		`42`,
		`{}`,
		`{"Task":{}}`,                  // id missing: neither form
		`{"Task":{"id":7}}`,            // id not a string
		`{"Task":{"id":null}}`,         // id null
		`{"Task":{"id":"a","id":"b"}}`, // duplicate inner field
		`{"task":{"id":"T"}}`,          // tags are case-sensitive
		`{"Custom":{"title":"t"}}`,     // description required
		`{"Custom":{"title":1,"description":""}}`,
		`{"kind":"k"}`,                       // id missing
		`{"id":"i"}`,                         // kind missing
		`{"kind":null,"id":"i"}`,             // kind null
		`{"kind":"k","id":5}`,                // id not a string
		`{"kind":"k","id":"i","labels":"x"}`, // labels not an array
		`{"kind":"k","id":"i","title":3}`,
		`{"kind":"k","id":"i","kind":"j"}`, // duplicate field
		`{"KIND":"k","ID":"i"}`,            // keys are case-sensitive
	} {
		var r SubjectRef
		err := r.UnmarshalJSON([]byte(in))
		if err == nil {
			t.Errorf("UnmarshalJSON(%s) = %#v, want error", in, r)
			continue
		}
		var inv *InvalidError
		if !errors.As(err, &inv) {
			t.Errorf("UnmarshalJSON(%s) error %T, want *InvalidError", in, err)
		}
	}
}

func TestSubjectRefMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   SubjectRef
		want string
	}{
		{"task tagged", SubjectRef{Kind: "animus.task", ID: "TASK-7"}, `{"Task":{"id":"TASK-7"}}`},
		{"task any case, title dropped", SubjectRef{Kind: "Animus.TASK", ID: "TASK-7", Title: "t", Description: "d"}, `{"Task":{"id":"TASK-7"}}`},
		{"requirement tagged", SubjectRef{Kind: "animus.requirement", ID: "REQ-1", Metadata: json.RawMessage(`{}`)}, `{"Requirement":{"id":"REQ-1"}}`},
		{"task null metadata", SubjectRef{Kind: "animus.task", ID: "T", Metadata: json.RawMessage(`null`)}, `{"Task":{"id":"T"}}`},
		{"custom title", SubjectRef{Kind: "custom", ID: "x", Title: "Nightly", Description: "d"}, `{"Custom":{"title":"Nightly","description":"d"}}`},
		{"custom falls back to id", SubjectRef{Kind: "CUSTOM", ID: "x"}, `{"Custom":{"title":"x","description":""}}`},
		{"bare task kind is flat", SubjectRef{Kind: "task", ID: "T"}, `{"kind":"task","id":"T"}`},
		{"Kelvin sign is not k", SubjectRef{Kind: "animus.tas\u212a", ID: "T"}, `{"kind":"animus.tas` + "\u212a" + `","id":"T"}`},
		{"labels force flat", SubjectRef{Kind: "animus.task", ID: "T", Labels: []string{"x"}}, `{"kind":"animus.task","id":"T","labels":["x"]}`},
		{"metadata forces flat", SubjectRef{Kind: "custom", ID: "c", Metadata: json.RawMessage(`{"a":1}`)}, `{"kind":"custom","id":"c","metadata":{"a":1}}`},
		{"flat order and omit-empty", SubjectRef{Kind: "github_issue", ID: "1#2", Title: "T", Description: "D", Labels: []string{"bug"}, Metadata: json.RawMessage(`{"n":1}`)},
			`{"kind":"github_issue","id":"1#2","title":"T","description":"D","labels":["bug"],"metadata":{"n":1}}`},
		{"flat omits empty metadata", SubjectRef{Kind: "k", ID: "i", Labels: []string{}, Metadata: json.RawMessage(`{}`)}, `{"kind":"k","id":"i"}`},
		{"flat keeps empty kind and id", SubjectRef{}, `{"kind":"","id":""}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Marshal = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSubjectRefRoundTrip(t *testing.T) {
	// in → decode → encode gives want, and want is a fixed point.
	tests := []struct{ in, want string }{
		{`{"kind":"animus.task","id":"TASK-7"}`, `{"Task":{"id":"TASK-7"}}`},
		{`{"Task":{"id":"TASK-7"}}`, `{"Task":{"id":"TASK-7"}}`},
		{`{"Requirement":{"id":"REQ-1"}}`, `{"Requirement":{"id":"REQ-1"}}`},
		{`{"Custom":{"title":"T","description":"D"}}`, `{"Custom":{"title":"T","description":"D"}}`},
		{`{"kind":"custom","id":"c","metadata":{}}`, `{"Custom":{"title":"c","description":""}}`},
		{`{"kind":"animus.requirement","id":"R","title":"t","metadata":null}`, `{"Requirement":{"id":"R"}}`},
		{`{"kind":"github_issue","id":"1296269#42","title":"Upload fails on files over 2 GiB","labels":["bug"],"metadata":{"installation_id":4242,"number":42}}`,
			`{"kind":"github_issue","id":"1296269#42","title":"Upload fails on files over 2 GiB","labels":["bug"],"metadata":{"installation_id":4242,"number":42}}`},
		{`{"kind":"animus.task","id":"T","labels":["a"]}`, `{"kind":"animus.task","id":"T","labels":["a"]}`},
	}
	for _, tc := range tests {
		var r SubjectRef
		if err := json.Unmarshal([]byte(tc.in), &r); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		got, err := json.Marshal(r)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s → %s (%v), want %s", tc.in, got, err, tc.want)
			continue
		}
		var again SubjectRef
		if err := json.Unmarshal(got, &again); err != nil {
			t.Fatal(err)
		}
		if back, _ := json.Marshal(again); string(back) != tc.want {
			t.Errorf("%s is not a fixed point: %s", tc.want, back)
		}
	}
}

func TestSubjectRefInDispatch(t *testing.T) {
	var d SubjectDispatch
	in := `{"subject":{"Task":{"id":"TASK-9"}},"workflow_ref":"standard","trigger_source":"test","requested_at":"2026-09-28T02:00:00+02:00","surprise":1}`
	if err := json.Unmarshal([]byte(in), &d); err != nil {
		t.Fatal(err)
	}
	if d.Subject == nil || d.Subject.Kind != KindTask || d.Subject.ID != "TASK-9" {
		t.Fatalf("subject = %+v", d.Subject)
	}
	got, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"subject":{"Task":{"id":"TASK-9"}},"workflow_ref":"standard","trigger_source":"test","requested_at":"2026-09-28T00:00:00Z"}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestCanonicalID(t *testing.T) {
	tests := []struct{ kind, id, want string }{
		{"animus.task", "TASK-1", "task:TASK-1"},
		{"animus.task", "task:TASK-9", "task:TASK-9"},
		{"github_issue", "1296269#42", "github_issue:1296269#42"},
		{"animus.task", "TASK:X", "task:X"},
		{"animus.requirement", "requirement:REQUIREMENT-075", "requirement:REQUIREMENT-075"},
		{"task", "TASK-LEGACY", "task:TASK-LEGACY"},
		{"trigger_event", "github-delivery-1177", "trigger_event:github-delivery-1177"},
		{" task ", " TASK-2 ", "task:TASK-2"},
		{"Animus.Task", "X", "Animus.Task:X"},  // the short forms are exact matches
		{" animus.task", "X", "animus.task:X"}, // mapped before trimming, as the reference does
		{"github_issue", "GITHUB_ISSUE:1#2", "github_issue:1#2"},
		{"github_issue", "github_issue:github_issue:1", "github_issue:github_issue:1"}, // only one prefix is dropped
		{"custom", "schedule:nightly", "custom:schedule:nightly"},
		{"k", "k:", ""}, // prefix only
		{"", "X", ""},
		{"   ", "X", ""},
		{"task", "   ", ""},
		{"task", "task:", ""},
	}
	for _, tc := range tests {
		got, err := CanonicalID(tc.kind, tc.id)
		if tc.want == "" {
			var inv *InvalidError
			if !errors.As(err, &inv) || inv.Msg != "queue subject identity is missing" {
				t.Errorf("CanonicalID(%q, %q) = %q, %v; want identity-missing error", tc.kind, tc.id, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CanonicalID(%q, %q) = %q, %v; want %q", tc.kind, tc.id, got, err, tc.want)
		}
	}
}

func TestLegacyKey(t *testing.T) {
	tests := []struct{ kind, id, want string }{
		{"animus.task", "TASK-1", "TASK-1"},
		{"animus.requirement", "REQ-1", "REQ-1"},
		{"custom", "nightly", "nightly"},
		{"task", "TASK-1", "TASK-1"},
		{"requirement", "REQ-1", "REQ-1"},
		{"pack.review", "REV-7", "pack.review::REV-7"},
		{"Animus.Task", "X", "Animus.Task::X"}, // exact match only
		{"github_issue", "1296269#42", "github_issue::1296269#42"},
		{"", "X", "::X"},
	}
	for _, tc := range tests {
		if got := legacyKey(tc.kind, tc.id); got != tc.want {
			t.Errorf("LegacyKey(%q, %q) = %q, want %q", tc.kind, tc.id, got, tc.want)
		}
	}
}

func TestTaskID(t *testing.T) {
	tests := []struct{ kind, id, want string }{
		{"animus.task", "TASK-1", "TASK-1"},
		{"ANIMUS.TASK", "TASK-1", "TASK-1"},
		{"task", " T ", " T "},
		{"Task", "T", "T"},
		{"animus.requirement", "R", ""},
		{"github_issue", "1", ""},
		{"tas\u212a", "T", ""},
	}
	for _, tc := range tests {
		if got := TaskID(tc.kind, tc.id); got != tc.want {
			t.Errorf("TaskID(%q, %q) = %q, want %q", tc.kind, tc.id, got, tc.want)
		}
	}
}

func TestSplitQualifiedID(t *testing.T) {
	tests := []struct {
		q            string
		kind, native string
		ok           bool
	}{
		{"github_issue:1296269#42", "github_issue", "1296269#42", true},
		{"task:TASK-1", "task", "TASK-1", true},
		{"custom:schedule:nightly", "custom", "schedule:nightly", true},
		{"task", "", "", false},
		{":x", "", "", false},
		{"x:", "", "", false},
		{" :x", "", "", false},
		{"x: ", "", "", false},
		{"", "", "", false},
	}
	for _, tc := range tests {
		kind, native, ok := SplitQualifiedID(tc.q)
		if kind != tc.kind || native != tc.native || ok != tc.ok {
			t.Errorf("SplitQualifiedID(%q) = %q, %q, %v; want %q, %q, %v", tc.q, kind, native, ok, tc.kind, tc.native, tc.ok)
		}
	}
}

func FuzzSubjectRef(f *testing.F) {
	for _, s := range []string{
		`{"Task":{"id":"TASK-7"}}`,
		`{"Requirement":{"id":"REQ-1"}}`,
		`{"Custom":{"title":"nightly","description":"run <all> & more"}}`,
		`{"kind":"animus.task","id":"TASK-7"}`,
		`{"kind":"ANIMUS.REQUIREMENT","id":"r","title":"t","description":"d"}`,
		`{"kind":"custom","id":"c","metadata":{}}`,
		`{"kind":"github_issue","id":"1296269#42","title":"Upload fails on files over 2 GiB","labels":["bug"],"metadata":{"installation_id":4242,"number":42}}`,
		`{"kind":"k","id":"i","metadata":null,"labels":null}`,
		`{"kind":"k","id":"i","metadata":"\u2028"}`,
		`{"Task":{"id":"T"},"kind":"k","id":"i"}`,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r SubjectRef
		if err := r.UnmarshalJSON(data); err != nil {
			return
		}
		first, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%q decoded to %#v, which does not encode: %v", data, r, err)
		}
		var again SubjectRef
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("%s does not decode: %v", first, err)
		}
		second, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Fatalf("unstable: %s then %s", first, second)
		}
		if strings.HasPrefix(string(first), `{"kind"`) != !isTagged(again) {
			t.Fatalf("form mismatch for %s", first)
		}
	})
}

func isTagged(r SubjectRef) bool {
	if len(r.Labels) > 0 || !metadataEmpty(r.Metadata) {
		return false
	}
	return asciiEqualFold(r.Kind, KindTask) || asciiEqualFold(r.Kind, KindRequirement) || asciiEqualFold(r.Kind, KindCustom)
}
