// Package canonjson writes JSON exactly as the queue protocol's reference
// implementation does, byte for byte: it parses a value as serde_json does
// with its default features (no float_roundtrip, no arbitrary_precision)
// and prints it with object keys sorted and serde_json's string escaping
// and number formatting. Go's encoding/json differs in both, hence this
// package; the queue's request hash (protocol/queue-v2.md §3.3) is built on
// it.
package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SyntaxError is returned for input the reference could not have accepted:
// not a single valid JSON value, invalid UTF-8, an unpaired surrogate
// escape, a number beyond the f64 range, or a literal that serde_json's
// fast path mis-parses.
type SyntaxError struct{ Msg string }

func (e *SyntaxError) Error() string { return e.Msg }

func syntaxErrorf(format string, args ...any) error {
	return &SyntaxError{Msg: fmt.Sprintf(format, args...)}
}

// Canonical re-encodes the JSON text v as serde_json prints the
// serde_json::Value it parses to, with object keys sorted:
//
//   - no white space; object keys sorted bytewise at every level (a repeated
//     key keeps its last value); arrays in order;
//   - strings escaped as serde_json does: \" \\ \b \f \n \r \t, other
//     control characters below U+0020 as \u00xx (lower-case hex); everything
//     else, including / < > & U+2028 U+2029 and all non-ASCII, written raw;
//   - numbers as serde_json's parser types them: a literal without fraction
//     or exponent that fits u64, or is negative and fits i64, is an integer
//     and written verbatim; "-0" and every other literal become an f64 and
//     are written in ryu's shortest form (see formatFloat).
//
// The f64 value of a literal is the one serde_json computes without its
// float_roundtrip feature (see parseF64). That is the correctly rounded
// value when the literal's digits, read as an integer, are below 2^53 (so
// any literal of up to 15 digits) and its decimal exponent is within ±22,
// and may be an ulp or two off otherwise; matching it keeps hashes equal to
// the reference's. For the same reason Canonical is idempotent except on
// such floats: re-reading its own output can move them by an ulp or two,
// exactly as it does in serde_json.
//
// It returns an *SyntaxError when v is not a single valid JSON value or is
// one serde_json rejects: invalid UTF-8, an unpaired surrogate escape, a
// number beyond the f64 range, or a literal that serde_json's fast path
// mis-parses (such as 18446744073709551616.5).
func Canonical(v []byte) ([]byte, error) {
	if out, ok := canonicalFlat(v); ok {
		return out, nil
	}
	return canonicalGeneral(v)
}

// canonicalGeneral is Canonical for any input: decoded into Go values by
// encoding/json, checked, written sorted.
func canonicalGeneral(v []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		if err == io.EOF {
			return nil, syntaxErrorf("invalid JSON: empty input")
		}
		return nil, syntaxErrorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, syntaxErrorf("invalid JSON: unexpected data after the top-level value")
	}
	if err := CheckText(v); err != nil {
		return nil, syntaxErrorf("invalid JSON: %v", err)
	}
	var b bytes.Buffer
	if err := writeCanonical(&b, x); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, x any) error {
	switch x := x.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		WriteString(b, x)
	case json.Number:
		s, err := canonicalNumber(string(x))
		if err != nil {
			return err
		}
		b.WriteString(s)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // bytewise, like Rust's String ordering
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			WriteString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		// json.Decoder with UseNumber produces only the types above.
		return fmt.Errorf("canonjson: unexpected decoded JSON type %T", x)
	}
	return nil
}

// WriteString writes s quoted and escaped as serde_json's compact
// formatter does.
func WriteString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue // the common byte first: this loop runs over every description
		}
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\b':
			esc = `\b`
		case c == '\f':
			esc = `\f`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		default: // c < 0x20
			esc = `\u00` + string(hexDigits[c>>4]) + string(hexDigits[c&0xf])
		}
		b.WriteString(s[start:i])
		b.WriteString(esc)
		start = i + 1
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// checkText rejects JSON text that Go's decoder would silently repair but
// serde_json refuses: invalid UTF-8 and \u escapes naming an unpaired UTF-16
// surrogate (Go substitutes U+FFFD for both). data must be valid JSON.
func CheckText(data []byte) error {
	if !utf8.Valid(data) {
		return errors.New("invalid UTF-8")
	}
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(data) && data[i+1] != 'u' {
				i++ // a one-character escape
				continue
			}
			if i+6 > len(data) {
				return errors.New("truncated escape in a string")
			}
			r := hex4(data[i+2 : i+6])
			i += 5
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return fmt.Errorf("unpaired surrogate \\u%04x in a string", r)
			case r >= 0xD800 && r <= 0xDBFF:
				if i+6 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' {
					if lo := hex4(data[i+3 : i+7]); lo >= 0xDC00 && lo <= 0xDFFF {
						i += 6
						continue
					}
				}
				return fmt.Errorf("unpaired surrogate \\u%04x in a string", r)
			}
		}
	}
	return nil
}

// hex4 decodes four hex digits (already validated by the JSON decoder).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// canonicalNumber returns how serde_json prints the number literal lit (valid
// JSON number syntax) after parsing it into a Value.
func canonicalNumber(lit string) (string, error) {
	if text, ok := integerLiteral(lit); ok {
		return text, nil
	}
	f, err := parseF64(lit)
	if err != nil {
		return "", err
	}
	return formatFloat(f), nil
}

// integerLiteral reports whether serde_json types lit as an integer (u64, or
// i64 when negative) and returns its text. "-0" is an f64 for serde_json.
func integerLiteral(lit string) (text string, ok bool) {
	if strings.ContainsAny(lit, ".eE") {
		return "", false
	}
	if strings.HasPrefix(lit, "-") {
		n, err := strconv.ParseInt(lit, 10, 64)
		if err != nil || n == 0 {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	n, err := strconv.ParseUint(lit, 10, 64)
	if err != nil {
		return "", false
	}
	return strconv.FormatUint(n, 10), true
}

// parseF64 converts a JSON number literal to f64 exactly as serde_json 1.x
// does without the float_roundtrip feature (de.rs: parse_integer,
// parse_number, parse_long_integer, parse_decimal, parse_decimal_overflow,
// parse_exponent, parse_exponent_overflow, f64_from_parts): the significand
// accumulates in a u64 until the next digit would overflow it, later digits
// only move the decimal exponent (integer part) or are dropped (fraction),
// and the result is float64(significand) multiplied or divided once by the
// correctly rounded power of ten (repeatedly by 1e308 past the table). An
// infinite result is an error, as it is for serde_json.
func parseF64(lit string) (float64, error) {
	p := numParser{s: lit, positive: true}
	if p.peek() == '-' {
		p.positive = false
		p.i++
	}
	var sig uint64
	if p.peek() == '0' {
		p.i++
	} else {
		for isDigit(p.peek()) {
			d := uint64(p.peek() - '0')
			if overflowU64(sig, d) {
				return p.longInteger(sig)
			}
			sig = sig*10 + d
			p.i++
		}
	}
	switch p.peek() {
	case '.':
		return p.decimal(sig, 0)
	case 'e', 'E':
		return p.exponent(sig, 0)
	}
	// An integer serde_json keeps as f64: -0, or a negative beyond i64.
	return p.sign(float64(sig)), nil
}

type numParser struct {
	s        string
	i        int
	positive bool
}

func (p *numParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *numParser) sign(f float64) float64 {
	if p.positive {
		return f
	}
	return -f
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// overflowU64 reports whether sig*10+d exceeds math.MaxUint64 (serde_json's
// overflow! macro).
func overflowU64(sig, d uint64) bool {
	const c = math.MaxUint64
	return sig >= c/10 && (sig > c/10 || d > c%10)
}

func overflowI32(exp, d int32) bool {
	const c = math.MaxInt32
	return exp >= c/10 && (exp > c/10 || d > c%10)
}

// longInteger: integer digits past u64 range only raise the exponent.
func (p *numParser) longInteger(sig uint64) (float64, error) {
	var exp int32
	for isDigit(p.peek()) {
		p.i++
		exp++
	}
	switch p.peek() {
	case '.':
		return p.decimal(sig, exp)
	case 'e', 'E':
		return p.exponent(sig, exp)
	}
	return p.fromParts(sig, exp)
}

func (p *numParser) decimal(sig uint64, exp int32) (float64, error) {
	p.i++ // '.'
	for isDigit(p.peek()) {
		d := uint64(p.peek() - '0')
		if overflowU64(sig, d) {
			for isDigit(p.peek()) { // the rest of the fraction is ignored
				p.i++
			}
			if c := p.peek(); c == 'e' || c == 'E' {
				return p.exponent(sig, exp)
			}
			return p.fromParts(sig, exp)
		}
		p.i++
		sig = sig*10 + d
		exp--
	}
	// serde_json's "at least one fraction digit" check; it misfires when
	// longInteger's exponent returns to zero, and serde_json then rejects
	// the number.
	if exp == 0 {
		return 0, syntaxErrorf("invalid JSON: number %s cannot be parsed by the reference JSON parser", p.s)
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		return p.exponent(sig, exp)
	}
	return p.fromParts(sig, exp)
}

func (p *numParser) exponent(sig uint64, start int32) (float64, error) {
	p.i++ // 'e' or 'E'
	positiveExp := true
	switch p.peek() {
	case '+':
		p.i++
	case '-':
		positiveExp = false
		p.i++
	}
	exp := int32(p.peek() - '0')
	p.i++
	for isDigit(p.peek()) {
		d := int32(p.peek() - '0')
		if overflowI32(exp, d) {
			if sig != 0 && positiveExp {
				return 0, p.outOfRange()
			}
			return p.sign(0), nil
		}
		exp = exp*10 + d
		p.i++
	}
	var final int32
	if positiveExp {
		final = saturatingAdd(start, exp)
	} else {
		final = saturatingAdd(start, -exp) // exp >= 0, so -exp cannot overflow
	}
	return p.fromParts(sig, final)
}

func saturatingAdd(a, b int32) int32 {
	s := int64(a) + int64(b)
	switch {
	case s > math.MaxInt32:
		return math.MaxInt32
	case s < math.MinInt32:
		return math.MinInt32
	}
	return int32(s)
}

func (p *numParser) fromParts(sig uint64, exp int32) (float64, error) {
	f := float64(sig)
	for {
		abs := int64(exp)
		if abs < 0 {
			abs = -abs
		}
		if exp != math.MinInt32 && abs <= 308 { // i32::wrapping_abs(MIN) misses the table too
			pow := pow10(int(abs))
			if exp >= 0 {
				f *= pow
				if math.IsInf(f, 0) {
					return 0, p.outOfRange()
				}
			} else {
				f /= pow
			}
			break
		}
		if f == 0 {
			break
		}
		if exp >= 0 {
			return 0, p.outOfRange()
		}
		f /= 1e308
		exp += 308
	}
	return p.sign(f), nil
}

func (p *numParser) outOfRange() error {
	return syntaxErrorf("invalid JSON: number %s is out of range", p.s)
}

// pow10 returns the float64 nearest 10^n (0 <= n <= 308), as the literals in
// serde_json's POW10 table are; math.Pow10 is not always correctly rounded.
func pow10(n int) float64 {
	f, _ := strconv.ParseFloat("1e"+strconv.Itoa(n), 64)
	return f
}

// formatF64 formats a finite f as serde_json does, with ryu's format64
// (ryu/src/pretty/mod.rs). Let d be the shortest round-tripping decimal
// digits of |f| (n of them) and kk the decimal point position, so that
// |f| = 0.d × 10^kk. Then:
//
//   - 0 is "0.0" (or "-0.0");
//   - if d ends at or left of the point and kk <= 16: d, kk-n zeros, ".0"
//     (1e15 → "1000000000000000.0", 100 → "100.0");
//   - else if 0 < kk <= 16: d with a point after kk digits (1.5, 12.34);
//   - else if -5 < kk <= 0: "0.", -kk zeros, d (0.0001, 0.000012);
//   - else scientific with the exponent kk-1 in plain decimal, no "+" and
//     no leading zeros: "de<exp>" when n == 1 (1e16, 1e-7, 5e-324),
//     otherwise "d[0].d[1:]e<exp>" (1.5e300, 1.2345e-7).
//
// So plain notation is used for 1e-5 <= |f| < 1e16, scientific otherwise.
// The digits come from strconv's shortest formatting, which picks the same
// digits as Ryū: the shortest that round-trip, closest to f when several
// are that short.
func formatFloat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // "-d.ddde-XX"
	var b strings.Builder
	if e[0] == '-' {
		b.WriteByte('-')
		e = e[1:]
	}
	mant, expText, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp10, _ := strconv.Atoi(expText) // strconv writes "+02" / "-07"; Atoi takes the sign
	n := len(digits)
	kk := exp10 + 1
	k := kk - n
	switch {
	case k >= 0 && kk <= 16:
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", k))
		b.WriteString(".0")
	case kk > 0 && kk <= 16:
		b.WriteString(digits[:kk])
		b.WriteByte('.')
		b.WriteString(digits[kk:])
	case kk > -5 && kk <= 0:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -kk))
		b.WriteString(digits)
	case n == 1:
		b.WriteString(digits)
		b.WriteByte('e')
		b.WriteString(strconv.Itoa(kk - 1))
	default:
		b.WriteByte(digits[0])
		b.WriteByte('.')
		b.WriteString(digits[1:])
		b.WriteByte('e')
		b.WriteString(strconv.Itoa(kk - 1))
	}
	return b.String()
}
