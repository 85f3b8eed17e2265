package queue

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestFormatFractionDigits(t *testing.T) {
	base := time.Date(2026, 10, 1, 12, 30, 5, 0, time.UTC)
	tests := []struct {
		ns    int
		fence string
		entry string
	}{
		{0, "2026-10-01T12:30:05Z", "2026-10-01T12:30:05+00:00"},
		{120_000_000, "2026-10-01T12:30:05.120Z", "2026-10-01T12:30:05.120+00:00"},
		{1_000_000, "2026-10-01T12:30:05.001Z", "2026-10-01T12:30:05.001+00:00"},
		{999_000_000, "2026-10-01T12:30:05.999Z", "2026-10-01T12:30:05.999+00:00"},
		{123_456_000, "2026-10-01T12:30:05.123456Z", "2026-10-01T12:30:05.123456+00:00"},
		{1_000, "2026-10-01T12:30:05.000001Z", "2026-10-01T12:30:05.000001+00:00"},
		{123_456_789, "2026-10-01T12:30:05.123456789Z", "2026-10-01T12:30:05.123456789+00:00"},
		{1, "2026-10-01T12:30:05.000000001Z", "2026-10-01T12:30:05.000000001+00:00"},
		{100, "2026-10-01T12:30:05.000000100Z", "2026-10-01T12:30:05.000000100+00:00"},
	}
	for _, tc := range tests {
		tm := base.Add(time.Duration(tc.ns))
		if got := formatFence(tm); got != tc.fence {
			t.Errorf("FormatFence(+%dns) = %s, want %s", tc.ns, got, tc.fence)
		}
		if got := formatEntry(tm); got != tc.entry {
			t.Errorf("FormatEntry(+%dns) = %s, want %s", tc.ns, got, tc.entry)
		}
	}
}

func TestFormatConvertsToUTC(t *testing.T) {
	tm := time.Date(2026, 10, 1, 14, 30, 5, 0, time.FixedZone("", 2*3600))
	if got, want := formatFence(tm), "2026-10-01T12:30:05Z"; got != want {
		t.Errorf("FormatFence = %s, want %s", got, want)
	}
	if got, want := formatEntry(tm), "2026-10-01T12:30:05+00:00"; got != want {
		t.Errorf("FormatEntry = %s, want %s", got, want)
	}
}

func TestTimestampJSON(t *testing.T) {
	tests := []struct {
		in, fence, entry string
	}{
		{`"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05+00:00"`},
		{`"2026-10-01T14:30:05+02:00"`, `"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05+00:00"`},
		{`"2026-10-01T07:00:05-05:30"`, `"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05+00:00"`},
		{`"2026-10-01T12:30:05+00:00"`, `"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05+00:00"`},
		{`"2026-10-01T12:30:05-00:00"`, `"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05+00:00"`},
		{`"2026-10-01T12:30:05.12Z"`, `"2026-10-01T12:30:05.120Z"`, `"2026-10-01T12:30:05.120+00:00"`},
		{`"2026-10-01T12:30:05.000Z"`, `"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05+00:00"`},
		{`"2026-10-01T12:30:05.1234Z"`, `"2026-10-01T12:30:05.123400Z"`, `"2026-10-01T12:30:05.123400+00:00"`},
		{`"2026-10-01T12:30:05.1234567Z"`, `"2026-10-01T12:30:05.123456700Z"`, `"2026-10-01T12:30:05.123456700+00:00"`},
		// digits past the ninth are truncated, as chrono does
		{`"2026-10-01T12:30:05.1234567899Z"`, `"2026-10-01T12:30:05.123456789Z"`, `"2026-10-01T12:30:05.123456789+00:00"`},
		// RFC 3339 §5.6 allows lower-case t and z
		{`"2026-10-01t12:30:05z"`, `"2026-10-01T12:30:05Z"`, `"2026-10-01T12:30:05+00:00"`},
		// crossing midnight, a year and a leap day
		{`"2027-01-01T01:00:00+02:00"`, `"2026-12-31T23:00:00Z"`, `"2026-12-31T23:00:00+00:00"`},
		{`"2028-02-29T23:59:59.5-01:00"`, `"2028-03-01T00:59:59.500Z"`, `"2028-03-01T00:59:59.500+00:00"`},
		{`"0000-01-01T00:00:00Z"`, `"0000-01-01T00:00:00Z"`, `"0000-01-01T00:00:00+00:00"`},
		{`"9999-12-31T23:59:59.999999999Z"`, `"9999-12-31T23:59:59.999999999Z"`, `"9999-12-31T23:59:59.999999999+00:00"`},
	}
	for _, tc := range tests {
		var ts Timestamp
		if err := json.Unmarshal([]byte(tc.in), &ts); err != nil {
			t.Errorf("Timestamp %s: %v", tc.in, err)
			continue
		}
		if ts.Location() != time.UTC {
			t.Errorf("Timestamp %s stored in %v, want UTC", tc.in, ts.Location())
		}
		if got, err := json.Marshal(ts); err != nil || string(got) != tc.fence {
			t.Errorf("Timestamp %s re-encodes as %s (%v), want %s", tc.in, got, err, tc.fence)
		}
		var et EntryTime
		if err := json.Unmarshal([]byte(tc.in), &et); err != nil {
			t.Errorf("EntryTime %s: %v", tc.in, err)
			continue
		}
		if got, err := json.Marshal(et); err != nil || string(got) != tc.entry {
			t.Errorf("EntryTime %s re-encodes as %s (%v), want %s", tc.in, got, err, tc.entry)
		}
		if !et.Equal(ts.Time) {
			t.Errorf("%s: EntryTime %v != Timestamp %v", tc.in, et.Time, ts.Time)
		}
	}
}

func TestTimestampJSONRejects(t *testing.T) {
	tests := []struct {
		in, msg string
	}{
		{`123`, "must be an RFC 3339 string, got a number"},
		{`true`, "got a boolean"},
		{`{}`, "got an object"},
		{`[]`, "got an array"},
		{`""`, "not an RFC 3339 date-time"},
		{`"2026-10-01"`, "not an RFC 3339 date-time"},
		{`"2026-10-01T12:30:05"`, "not an RFC 3339 date-time"},       // no zone
		{`"2026-10-01 12:30:05Z"`, "not an RFC 3339 date-time"},      // space separator
		{`"2026-10-01T12:30:05,5Z"`, "not an RFC 3339 date-time"},    // comma fraction
		{`"2026-10-01T12:30:05.Z"`, "not an RFC 3339 date-time"},     // empty fraction
		{`"2026-10-01T12:30:05+0200"`, "not an RFC 3339 date-time"},  // offset without colon
		{`"2026-10-01T12:30:05+02"`, "not an RFC 3339 date-time"},    // short offset
		{`"2026-1-01T12:30:05Z"`, "not an RFC 3339 date-time"},       // short month
		{`" 2026-10-01T12:30:05Z"`, "not an RFC 3339 date-time"},     // padding
		{`"2026-10-01T12:30:05Z "`, "not an RFC 3339 date-time"},     // padding
		{`"2026-02-30T12:30:05Z"`, "not a valid RFC 3339 date-time"}, // no such day
		{`"2026-13-01T12:30:05Z"`, "not a valid RFC 3339 date-time"},
		{`"2026-10-01T24:00:00Z"`, "not a valid RFC 3339 date-time"},
		{`"2026-10-01T12:60:00Z"`, "not a valid RFC 3339 date-time"},
		{`"2026-10-01T23:59:60Z"`, "not a valid RFC 3339 date-time"}, // leap seconds unsupported
		{`"2026-10-01T12:30:05+24:00"`, "not an RFC 3339 date-time"},
		{`"2026-10-01T12:30:05+02:60"`, "not an RFC 3339 date-time"},
		{`"0000-01-01T00:00:00+01:00"`, "outside the RFC 3339 range"}, // year -1 in UTC
		{`"9999-12-31T23:30:00-01:00"`, "outside the RFC 3339 range"}, // year 10000 in UTC
		{`"2026-10-01T12:30:05Z`, "timestamp must be an RFC 3339 string"},
	}
	for _, tc := range tests {
		for name, dst := range map[string]json.Unmarshaler{"Timestamp": new(Timestamp), "EntryTime": new(EntryTime)} {
			err := dst.UnmarshalJSON([]byte(tc.in))
			if err == nil {
				t.Errorf("%s.UnmarshalJSON(%s) succeeded, want error", name, tc.in)
				continue
			}
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Errorf("%s.UnmarshalJSON(%s) = %T, want *InvalidError", name, tc.in, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s.UnmarshalJSON(%s) = %q, want it to mention %q", name, tc.in, err, tc.msg)
			}
		}
	}
}

func TestTimestampNullIsNoOp(t *testing.T) {
	ts := Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	before := ts
	if err := json.Unmarshal([]byte(`null`), &ts); err != nil || !ts.Equal(before.Time) {
		t.Errorf("null: %v, %v", err, ts)
	}
	et := EntryTime{before.Time}
	if err := json.Unmarshal([]byte(`null`), &et); err != nil || !et.Equal(before.Time) {
		t.Errorf("null: %v, %v", err, et)
	}
}

func TestTimestampMarshalOutOfRange(t *testing.T) {
	for _, y := range []int{-1, 10000} {
		tm := time.Date(y, 6, 1, 0, 0, 0, 0, time.UTC)
		if _, err := json.Marshal(Timestamp{tm}); err == nil {
			t.Errorf("Timestamp year %d marshalled", y)
		}
		if _, err := json.Marshal(EntryTime{tm}); err == nil {
			t.Errorf("EntryTime year %d marshalled", y)
		}
	}
}

func TestTimestampInStruct(t *testing.T) {
	// Fence expiries are FenceTime (= Timestamp) and must keep the Z form
	// inside larger values.
	lf := LeaseFence{EntryID: "e", OwnerID: "o", Generation: 1,
		ExpiresAt: FenceTime{time.Date(2026, 10, 1, 12, 30, 5, 0, time.UTC)}}
	got, err := json.Marshal(lf)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"entry_id":"e","owner_id":"o","generation":1,"expires_at":"2026-10-01T12:30:05Z"}`
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	e := Entry{EntryID: "e", EnqueuedAt: EntryTime{time.Date(2026, 10, 1, 12, 0, 5, 0, time.UTC)}}
	got, err = json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"enqueued_at":"2026-10-01T12:00:05+00:00"`) {
		t.Errorf("entry: %s", got)
	}
}

func TestParseRFC3339(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2030-01-01T00:00:00Z", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"2030-01-01T02:00:00.25+02:00", time.Date(2030, 1, 1, 0, 0, 0, 250_000_000, time.UTC), true},
		{"2030-01-01t00:00:00z", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"0000-01-01T00:00:00+01:00", time.Date(-1, 12, 31, 23, 0, 0, 0, time.UTC), true},
		{"tomorrow", time.Time{}, false},
		{"2030-01-01", time.Time{}, false},
		{"2030-01-01T00:00:00", time.Time{}, false},
		{"2030-02-29T00:00:00Z", time.Time{}, false},
		{"2030-01-01T00:00:00.Z", time.Time{}, false},
		{"", time.Time{}, false},
	}
	for _, tc := range tests {
		got, err := parseRFC3339(tc.in)
		if tc.ok != (err == nil) {
			t.Errorf("ParseRFC3339(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && (!got.Equal(tc.want) || got.Location() != time.UTC) {
			t.Errorf("ParseRFC3339(%q) = %v, want %v in UTC", tc.in, got, tc.want)
		}
	}
}

var fenceTimeRE = regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.(\d{3}|\d{6}|\d{9}))?Z"$`)

func FuzzTimestamp(f *testing.F) {
	for _, s := range []string{
		`"2026-10-01T12:30:05Z"`, `"2026-10-01T14:30:05.120+02:00"`, `"2026-10-01T12:00:05+00:00"`,
		`"2026-10-01t12:30:05.123456789z"`, `"0000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999-23:59"`,
		`"2026-02-29T00:00:00Z"`, `null`, `12`, `"2026-10-01T12:30:05,5Z"`, `"\u0032026-10-01T12:30:05Z"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ts Timestamp
		if err := ts.UnmarshalJSON(data); err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("error %T is not *InvalidError: %v", err, err)
			}
			return
		}
		if string(data) == "null" {
			return
		}
		out, err := ts.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted %q but cannot marshal: %v", data, err)
		}
		if !fenceTimeRE.Match(out) {
			t.Fatalf("%q encodes as %s", data, out)
		}
		var back Timestamp
		if err := back.UnmarshalJSON(out); err != nil || !back.Equal(ts.Time) {
			t.Fatalf("%s does not read back: %v", out, err)
		}
		again, _ := back.MarshalJSON()
		if string(again) != string(out) {
			t.Fatalf("unstable: %s then %s", out, again)
		}
		var et EntryTime
		if err := et.UnmarshalJSON(data); err != nil || !et.Equal(ts.Time) {
			t.Fatalf("EntryTime disagrees on %q: %v", data, err)
		}
	})
}
