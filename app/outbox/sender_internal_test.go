package outbox

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestCheckOutputFitsGitHub(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"short", "all good"},
		{"exactly the limit", strings.Repeat("a", maxTextBytes)},
		{"ascii over", strings.Repeat("a", maxTextBytes+10)},
		{"multibyte over", strings.Repeat("é", maxTextBytes)},
		{"4-byte runes over", strings.Repeat("😀", maxTextBytes/3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := fitText(tc.in)
			if len(out) > maxTextBytes || !utf8.ValidString(out) {
				t.Fatalf("%d bytes, valid UTF-8 %v", len(out), utf8.ValidString(out))
			}
			if cut := len(tc.in) > maxTextBytes; cut != strings.HasSuffix(out, cutNote) || (!cut && out != tc.in) {
				t.Fatalf("cut %v, note %v", cut, strings.HasSuffix(out, cutNote))
			}
			title := fitTitle(tc.in)
			if n := utf8.RuneCountInString(title); n > maxTitleRunes || !utf8.ValidString(title) {
				t.Fatalf("title of %d characters", n)
			}
		})
	}
	if got := detailsURL("https://gitlease.example.com/", "e1"); got != "https://gitlease.example.com/ui/items/e1" {
		t.Fatalf("details URL %q", got)
	}
	if got := detailsURL("", "e1"); got != "" {
		t.Fatalf("details URL without a public URL %q", got)
	}
}

func TestRowBackoffGrowsFromAQuarterSecond(t *testing.T) {
	t.Parallel()
	for n, want := range map[int][2]time.Duration{
		1: {125 * time.Millisecond, 375 * time.Millisecond},
		2: {250 * time.Millisecond, 750 * time.Millisecond},
		3: {500 * time.Millisecond, 1500 * time.Millisecond},
		9: {15 * time.Second, 30 * time.Second},
	} {
		if d := rowBackoff(n, 30*time.Second); d < want[0] || d > want[1] {
			t.Errorf("backoff before retry %d = %v, want within %v", n, d, want)
		}
	}
}
