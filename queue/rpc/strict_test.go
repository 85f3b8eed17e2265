package rpc

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gitlease/gitlease/queue"
)

// leaseParams has the shape of QueueLeaseV2Request.
type leaseParams struct {
	Max         uint64        `json:"max"`
	OwnerID     string        `json:"owner_id"`
	WorkflowIDs []string      `json:"workflow_ids"`
	Exclude     []queue.Fence `json:"exclude,omitempty"`
}

const leaseFence = `{"schema":"animus.execution-fence.v1","version":1,"workflow_id":"wf-0001","workflow_generation":1,` +
	`"subject":{"qualified_id":"github_issue:1296269#42","generation":1},` +
	`"queue_lease":{"entry_id":"3f6c1d2e-8a4b-4c9d-b1e7-5a2f9c0d7e18","owner_id":"owner-7f3a","generation":1,"expires_at":"2026-10-01T14:30:05+02:00"},` +
	`"repository":{"repository":"acme/widgets","base_ref":"refs/heads/main","head_ref":"refs/heads/gitlease/issue-42"}}`

func TestDecodeStrictAccepts(t *testing.T) {
	var p leaseParams
	in := `{"max":1,"owner_id":"owner-7f3a","workflow_ids":["w1"],"exclude":[` + leaseFence + `]}`
	if err := decodeStrict([]byte(in), &p, "lease"); err != nil {
		t.Fatal(err)
	}
	want := leaseParams{Max: 1, OwnerID: "owner-7f3a", WorkflowIDs: []string{"w1"}, Exclude: []queue.Fence{{
		Schema: queue.FenceSchema, Version: 1, WorkflowID: "wf-0001", WorkflowGeneration: 1,
		Subject: &queue.SubjectGeneration{QualifiedID: "github_issue:1296269#42", Generation: 1},
		QueueLease: &queue.LeaseFence{EntryID: "3f6c1d2e-8a4b-4c9d-b1e7-5a2f9c0d7e18", OwnerID: "owner-7f3a", Generation: 1,
			ExpiresAt: queue.FenceTime{Time: time.Date(2026, 10, 1, 12, 30, 5, 0, time.UTC)}},
		Repository: &queue.Reservation{Repository: "acme/widgets", BaseRef: "refs/heads/main", HeadRef: "refs/heads/gitlease/issue-42"},
	}}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got %+v\nwant %+v", p, want)
	}
}

func TestDecodeStrictErrors(t *testing.T) {
	tests := []struct {
		name, in, msg string
	}{
		{"unknown field (exact serde wording)",
			`{"max":1,"owner_id":"owner-7f3a","workflow_ids":["w1"],"surprise":true}`,
			"invalid lease params: unknown field `surprise`, expected one of `max`, `owner_id`, `workflow_ids`, `exclude`"},
		{"keys are case-sensitive", `{"MAX":1}`,
			"invalid lease params: unknown field `MAX`, expected one of `max`, `owner_id`, `workflow_ids`, `exclude`"},
		{"unknown field in a nested struct", `{"exclude":[` + leaseFence + `,{"schema":"s","extra":1}]}`,
			"invalid lease params: unknown field `extra`, expected one of `schema`, `version`, `workflow_id`, `workflow_generation`, `subject`, `queue_lease`, `repository` at `exclude[1]`"},
		{"two-field struct wording", `{"exclude":[{"subject":{"qualified_id":"a:b","generation":1,"x":0}}]}`,
			"invalid lease params: unknown field `x`, expected `qualified_id` or `generation` at `exclude[0].subject`"},
		{"duplicate field", `{"max":1,"max":2}`, "invalid lease params: duplicate field `max`"},
		{"negative uint", `{"max":-1}`, "invalid lease params: invalid value: integer `-1`, expected u64 at `max`"},
		{"fractional uint", `{"max":1.5}`, "invalid lease params: invalid type: floating point `1.5`, expected u64 at `max`"},
		{"integral float for uint", `{"max":1.0}`, "invalid lease params: invalid type: floating point `1.0`, expected u64 at `max`"},
		{"exponent for uint", `{"max":1e3}`, "invalid lease params: invalid type: floating point `1e3`, expected u64 at `max`"},
		{"uint overflow", `{"max":18446744073709551616}`, "invalid lease params: invalid value: integer `18446744073709551616`, expected u64 at `max`"},
		{"string for uint", `{"max":"1"}`, "invalid lease params: invalid type: string \"1\", expected u64 at `max`"},
		{"number for string", `{"owner_id":7}`, "invalid lease params: invalid type: integer `7`, expected a string at `owner_id`"},
		{"object for array", `{"workflow_ids":{}}`, "invalid lease params: invalid type: map, expected a sequence at `workflow_ids`"},
		{"bool in array", `{"workflow_ids":["a",true]}`, "invalid lease params: invalid type: boolean `true`, expected a string at `workflow_ids[1]`"},
		{"nested negative", `{"exclude":[{"version":-1}]}`, "invalid lease params: invalid value: integer `-1`, expected u64 at `exclude[0].version`"},
		{"top level array", `[1]`, "invalid lease params: invalid type: sequence, expected an object"},
		{"top level string", `"x"`, "invalid lease params: invalid type: string \"x\", expected an object"},
		{"missing params: empty", ``, "invalid lease params: missing params"},
		{"missing params: blank", " \n", "invalid lease params: missing params"},
		{"missing params: null", `null`, "invalid lease params: missing params"},
		{"malformed", `{"max":1`, "invalid lease params: malformed JSON: unexpected end of JSON input"},
		{"trailing data", `{"max":1} {}`, "invalid lease params: malformed JSON:"},
		{"invalid UTF-8", "{\"owner_id\":\"\xff\"}", "invalid lease params: invalid UTF-8"},
		{"unpaired surrogate", `{"owner_id":"\udc00"}`, "invalid lease params: unpaired surrogate"},
		{"bad timestamp inside a fence", `{"exclude":[{"queue_lease":{"expires_at":"soon"}}]}`,
			"invalid lease params: invalid timestamp: \"soon\" is not an RFC 3339 date-time"},
		{"timestamp of the wrong type", `{"exclude":[{"queue_lease":{"expires_at":5}}]}`,
			"invalid lease params: timestamp must be an RFC 3339 string, got a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p leaseParams
			err := decodeStrict([]byte(tc.in), &p, "lease")
			var inv *queue.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("err = %v (%T), want *InvalidError", err, err)
			}
			if !strings.HasPrefix(inv.Msg, tc.msg) {
				t.Errorf("message\n got %q\nwant %q", inv.Msg, tc.msg)
			}
		})
	}
}

func TestDecodeStrictUnknownFieldMessageExact(t *testing.T) {
	var p leaseParams
	err := decodeStrict([]byte(`{"max":1,"owner_id":"owner-7f3a","workflow_ids":["w1"],"surprise":true}`), &p, "queue/v2/lease")
	const want = "invalid queue/v2/lease params: unknown field `surprise`, expected one of `max`, `owner_id`, `workflow_ids`, `exclude`"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestDecodeStrictNotStrictInside(t *testing.T) {
	// RawMessage, values with their own UnmarshalJSON, interfaces and maps
	// of them are not checked member by member.
	type params struct {
		Dispatch json.RawMessage   `json:"subject_dispatch"`
		Subject  *queue.SubjectRef `json:"subject,omitempty"`
		Any      any               `json:"any,omitempty"`
		Extra    map[string]any    `json:"extra,omitempty"`
		When     *queue.Timestamp  `json:"when,omitempty"`
		Counts   map[string]uint8  `json:"counts,omitempty"`
	}
	in := `{"subject_dispatch":{"whatever":[1,{"x":2}],"surprise":true},"subject":{"kind":"k","id":"i","surprise":1},` +
		`"any":{"z":1},"extra":{"a":{"b":1}},"when":"2026-10-01T12:00:00Z","counts":{"a":1}}`
	var p params
	if err := decodeStrict([]byte(in), &p, "x"); err != nil {
		t.Fatal(err)
	}
	if string(p.Dispatch) != `{"whatever":[1,{"x":2}],"surprise":true}` || p.Subject.ID != "i" || p.Counts["a"] != 1 {
		t.Errorf("decoded %+v", p)
	}
	err := decodeStrict([]byte(`{"counts":{"a":256}}`), &p, "x")
	if err == nil || err.Error() != "invalid x params: invalid value: integer `256`, expected u8 at `counts.a`" {
		t.Errorf("map element range: %v", err)
	}
}

func TestDecodeStrictNullIsAbsent(t *testing.T) {
	p := leaseParams{Max: 3}
	if err := decodeStrict([]byte(`{"max":null,"owner_id":null,"workflow_ids":null,"exclude":null}`), &p, "lease"); err != nil {
		t.Fatal(err)
	}
	if p.Max != 3 {
		t.Errorf("null overwrote max: %+v", p)
	}
}

func TestDecodeStrictEmbeddedAndTags(t *testing.T) {
	type Inner struct {
		A string `json:"a"`
		B int    `json:"b,string"`
	}
	type outer struct {
		Inner
		C       bool   `json:"c"`
		Skipped string `json:"-"`
		Plain   string
	}
	var o outer
	if err := decodeStrict([]byte(`{"a":"x","b":"12","c":true,"Plain":"p"}`), &o, "o"); err != nil {
		t.Fatal(err)
	}
	if o.A != "x" || o.B != 12 || !o.C || o.Plain != "p" {
		t.Errorf("decoded %+v", o)
	}
	err := decodeStrict([]byte(`{"Skipped":"x"}`), &o, "o")
	want := "invalid o params: unknown field `Skipped`, expected one of `a`, `b`, `c`, `Plain`"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	var empty struct{}
	err = decodeStrict([]byte(`{"x":1}`), &empty, "e")
	if err == nil || err.Error() != "invalid e params: unknown field `x`, there are no fields" {
		t.Errorf("err = %v", err)
	}
	var one struct {
		Only string `json:"only"`
	}
	err = decodeStrict([]byte(`{"x":1}`), &one, "e")
	if err == nil || err.Error() != "invalid e params: unknown field `x`, expected `only`" {
		t.Errorf("err = %v", err)
	}
}

func TestDecodeStrictBadTarget(t *testing.T) {
	var n int
	var nilPtr *leaseParams
	for _, v := range []any{nil, leaseParams{}, &n, nilPtr} {
		err := decodeStrict([]byte(`{}`), v, "x")
		var inv *queue.InvalidError
		if err == nil || errors.As(err, &inv) {
			t.Errorf("decodeStrict into %T: %v, want a plain error", v, err)
		}
	}
}

// fuzzTarget exercises every kind of field the walker distinguishes.
type fuzzTarget struct {
	Max      uint64                 `json:"max"`
	Small    uint8                  `json:"small,omitempty"`
	Signed   int32                  `json:"signed,omitempty"`
	Ratio    float64                `json:"ratio,omitempty"`
	Flag     *bool                  `json:"flag,omitempty"`
	Owner    string                 `json:"owner_id"`
	IDs      []string               `json:"workflow_ids"`
	Exclude  []queue.Fence          `json:"exclude,omitempty"`
	Pair     [2]int                 `json:"pair,omitempty"`
	Blob     []byte                 `json:"blob,omitempty"`
	Vars     map[string]string      `json:"vars,omitempty"`
	Raw      json.RawMessage        `json:"raw,omitempty"`
	Dispatch *queue.SubjectDispatch `json:"subject_dispatch,omitempty"`
	Entry    *queue.Entry           `json:"entry,omitempty"`
	Any      any                    `json:"any,omitempty"`
	Quoted   int64                  `json:"quoted,omitempty,string"`
}

func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"max":1,"owner_id":"owner-7f3a","workflow_ids":["w1"]}`,
		`{"max":1,"owner_id":"owner-7f3a","workflow_ids":["w1"],"surprise":true}`,
		`{"max":5,"owner_id":"o","workflow_ids":["a","b"],"exclude":[` + leaseFence + `]}`,
		`{"small":256,"signed":-2147483649,"ratio":1e400,"flag":null,"pair":[1,2,3],"blob":"aGk=","quoted":"12"}`,
		`{"subject_dispatch":{"subject":{"Task":{"id":"T"}},"workflow_ref":"w","trigger_source":"t","requested_at":"2026-10-01T12:00:00Z"}}`,
		`{"entry":{"entry_id":"e","enqueued_at":"2026-10-01T12:00:05+00:00","expire_after_secs":-1}}`,
		`{"vars":{"a":"b"},"raw":[1,{"x":null}],"any":{"deep":[[[]]]}}`,
		`{"max":1,"max":1}`, `[]`, `null`, `"\ud800"`, `{"owner_id":"\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v fuzzTarget
		err := decodeStrict(data, &v, "fuzz")
		if err == nil {
			return
		}
		var inv *queue.InvalidError
		if !errors.As(err, &inv) {
			t.Fatalf("error %T is not *queue.InvalidError: %v", err, err)
		}
		if !strings.HasPrefix(inv.Msg, "invalid fuzz params: ") {
			t.Fatalf("message %q lacks the prefix", inv.Msg)
		}
	})
}
