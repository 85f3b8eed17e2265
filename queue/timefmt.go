package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Timestamps on the wire (protocol/queue-v2.md §2.1, §2.3): any RFC 3339
// offset is accepted; the queue writes UTC with the fewest of 0, 3, 6 or 9
// fraction digits that keep the instant exact (chrono's SecondsFormat::AutoSi),
// with "Z" for fences and dispatches and "+00:00" for entry timestamps, as the
// reference queue does.

// parseRFC3339 parses s as an RFC 3339 date-time ("2026-10-01T12:00:05Z",
// "2026-10-01T14:00:05.5+02:00") and returns it in UTC. The date and time
// separator may be "T" or "t" and the zone "Z", "z" or a ±hh:mm offset, as
// RFC 3339 §5.6 allows; any number of fraction digits is accepted (digits past
// the ninth are truncated). Leap seconds (":60") are not supported.
//
// It returns an error naming s when s is not of that form or names an
// impossible date or time.
func parseRFC3339(s string) (time.Time, error) {
	if !rfc3339Shape(s) {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 date-time", s)
	}
	b := []byte(s)
	b[10] = 'T' // RFC 3339 allows lower case; time.Parse does not.
	if last := len(b) - 1; b[last] == 'z' {
		b[last] = 'Z'
	}
	t, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a valid RFC 3339 date-time", s)
	}
	return t.UTC(), nil
}

// rfc3339Shape reports whether s has the exact lexical form of an RFC 3339
// date-time, so that time.Parse's extra leniency (a comma before the fraction,
// for one) never reaches the wire.
func rfc3339Shape(s string) bool {
	digits := func(from, to int) bool {
		for i := from; i < to; i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	// 2006-01-02T15:04:05 is 19 bytes; the shortest zone is one byte.
	if len(s) < 20 || !digits(0, 4) || s[4] != '-' || !digits(5, 7) || s[7] != '-' ||
		!digits(8, 10) || (s[10] != 'T' && s[10] != 't') || !digits(11, 13) ||
		s[13] != ':' || !digits(14, 16) || s[16] != ':' || !digits(17, 19) {
		return false
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	switch rest := s[i:]; {
	case rest == "Z" || rest == "z":
		return true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		// time.Parse allows an offset hour of 24; RFC 3339 stops at 23:59.
		return digits(i+1, i+3) && digits(i+4, i+6) && rest[1:3] <= "23" && rest[4:6] <= "59"
	}
	return false
}

// formatFence formats t in UTC as "2006-01-02T15:04:05Z" with 0, 3, 6 or 9
// fraction digits, the fewest that represent t's nanoseconds exactly. The
// result is RFC 3339 only when t's UTC year is within 0000..9999.
func formatFence(t time.Time) string {
	return formatUTC(t) + "Z"
}

// formatEntry formats t like formatFence but with a "+00:00" offset, the form
// the reference queue writes for enqueued_at, assigned_at and held_at.
func formatEntry(t time.Time) string {
	return formatUTC(t) + "+00:00"
}

func formatUTC(t time.Time) string {
	t = t.UTC()
	s := t.Format("2006-01-02T15:04:05")
	ns := t.Nanosecond()
	switch {
	case ns == 0:
		return s
	case ns%1_000_000 == 0:
		return s + "." + pad(ns/1_000_000, 3)
	case ns%1_000 == 0:
		return s + "." + pad(ns/1_000, 6)
	default:
		return s + "." + pad(ns, 9)
	}
}

func pad(n, width int) string {
	s := strconv.Itoa(n)
	for len(s) < width {
		s = "0" + s
	}
	return s
}

// formattable reports whether t can be written as RFC 3339: its UTC year
// must have four digits.
func formattable(t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("timestamp year %d is outside the RFC 3339 range 0000..9999", y)
	}
	return nil
}

// parseTimestampJSON decodes a JSON string holding an RFC 3339 date-time and
// checks that its UTC form can be written back. Its errors are *InvalidError
// because a bad timestamp is always the client's mistake.
func parseTimestampJSON(data []byte) (time.Time, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '"' {
		return time.Time{}, invalidf("timestamp must be an RFC 3339 string, got %s", describeJSON(data))
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return time.Time{}, invalidf("timestamp must be an RFC 3339 string: %s", JSONErrorText(err))
	}
	t, err := parseRFC3339(s)
	if err != nil {
		return time.Time{}, invalidf("invalid timestamp: %v", err)
	}
	if err := formattable(t); err != nil {
		return time.Time{}, invalidf("invalid timestamp %q: %v", s, err)
	}
	return t, nil
}

// describeJSON names the kind of a JSON value for error messages.
func describeJSON(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '"':
		return "a string"
	default:
		return "a number"
	}
}

// MarshalJSON writes t as an RFC 3339 string in UTC with a "Z" and 0, 3, 6 or
// 9 fraction digits (see formatFence). It fails when t's UTC year is outside
// 0000..9999.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	if err := formattable(t.Time); err != nil {
		return nil, err
	}
	return []byte(`"` + formatFence(t.Time) + `"`), nil
}

// UnmarshalJSON reads an RFC 3339 string with any offset (see parseRFC3339)
// and stores the instant in UTC. It rejects non-strings, invalid date-times
// and instants whose UTC year is outside 0000..9999. JSON null leaves t
// unchanged, like encoding/json does for other types.
func (t *Timestamp) UnmarshalJSON(data []byte) error { return unmarshalTime(data, &t.Time) }

// MarshalJSON writes t like Timestamp.MarshalJSON but with a "+00:00" offset
// (see formatEntry).
func (t EntryTime) MarshalJSON() ([]byte, error) {
	if err := formattable(t.Time); err != nil {
		return nil, err
	}
	return []byte(`"` + formatEntry(t.Time) + `"`), nil
}

// UnmarshalJSON reads any RFC 3339 string, exactly as Timestamp.UnmarshalJSON
// does, and stores the instant in UTC.
func (t *EntryTime) UnmarshalJSON(data []byte) error { return unmarshalTime(data, &t.Time) }

// unmarshalTime is both timestamp types' UnmarshalJSON: null leaves dst
// unchanged; anything else must be a formattable RFC 3339 string.
func unmarshalTime(data []byte, dst *time.Time) error {
	if string(data) == "null" {
		return nil
	}
	v, err := parseTimestampJSON(data)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}
