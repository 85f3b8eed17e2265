package worker

import (
	"strings"
	"testing"
)

// TestMaskedTail: secrets of 8 characters or more are *** in the tail,
// the longest first, also when earlier output is dropped in the middle of
// one or a secret is written in pieces; shorter values are left alone.
func TestMaskedTail(t *testing.T) {
	t.Parallel()
	const token = "ghs_0123456789abcdefghij"
	m := newMasker([]string{token, "ghs_0123", "short", "agent-key-xyz"})
	tb := newTailBuffer(40, m)
	_, _ = tb.Write([]byte(strings.Repeat("x", 100) + token[:6]))
	_, _ = tb.Write([]byte(token[6:] + "\ntoken " + token + " key agent-key-xyz short\n"))
	got := tb.String()
	if strings.Contains(got, "ghs_") || strings.Contains(got, "agent-key") || !strings.Contains(got, "token *** key *** short") {
		t.Errorf("tail %q, want the secrets masked and short values kept", got)
	}
	if len(got) > 40 {
		t.Errorf("tail is %d bytes, want at most 40", len(got))
	}
	if s := newMasker(nil).apply("nothing " + token); s != "nothing "+token {
		t.Errorf("an empty masker changed the text: %q", s)
	}
	if vs := passedValues([]string{"A=1", "B=two", "A=3", "C=x"}, []string{"A", "B"}); strings.Join(vs, ",") != "1,two" {
		t.Errorf("passedValues = %v, want the first of each passed name", vs)
	}
}
