package outbox

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAnswerIsBounded(t *testing.T) {
	t.Parallel()
	var at attempt
	if at.answer() != nil {
		t.Fatal("an attempt without answers has one")
	}
	for range 200 {
		at.answered(201, "created branch é-%s", strings.Repeat("ü", 3))
	}
	a := *at.answer()
	if len(a) > maxAnswer || !utf8.ValidString(a) || !strings.HasSuffix(a, "…") || !strings.HasPrefix(a, "201 created branch é-üüü; 201 ") {
		t.Errorf("answer of %d bytes, valid UTF-8 %t: %q…", len(a), utf8.ValidString(a), a[:min(len(a), 60)])
	}
}
