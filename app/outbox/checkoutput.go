package outbox

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// GitHub's limits on a check run's output.
const (
	maxTitleRunes = 255   // output.title, in characters
	maxTextBytes  = 65535 // output.summary and output.text, in bytes
)

// cutNote ends a summary or text that was cut to fit.
const cutNote = "\n\n…(cut by gitlease: GitHub keeps at most 65535 bytes here)"

// fitTitle cuts a check run title to GitHub's 255 characters.
func fitTitle(s string) string {
	if utf8.RuneCountInString(s) <= maxTitleRunes {
		return s
	}
	r := []rune(s)
	return string(r[:maxTitleRunes-1]) + "…"
}

// fitText cuts a check run summary or text to GitHub's 65535 bytes, on a
// UTF-8 boundary, ending it with a note that it was cut.
func fitText(s string) string { return cutBytes(s, maxTextBytes, cutNote) }

// cutBytes cuts s to at most limit bytes on a UTF-8 boundary, ending it
// with note when it was cut.
func cutBytes(s string, limit int, note string) string {
	if len(s) <= limit {
		return s
	}
	n := limit - len(note)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + note
}

// detailsURL is the item's dashboard page under the public URL, "" when
// none is configured.
func detailsURL(publicURL, entryID string) string {
	if publicURL == "" {
		return ""
	}
	return fmt.Sprintf("%s/ui/items/%s", strings.TrimRight(publicURL, "/"), entryID)
}
