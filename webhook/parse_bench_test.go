package webhook

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// BenchmarkParsePayload measures the one parse of a 20 KB pull request
// delivery into the fields the mapper uses.
func BenchmarkParsePayload(b *testing.B) {
	raw, err := os.ReadFile("../testdata/payloads/pull_request-opened.json")
	if err != nil {
		b.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatal(err)
	}
	pr := m["pull_request"].(map[string]any)
	pr["body"] = pr["body"].(string) + strings.Repeat("Some *markdown* text, with `code` and\nnew lines. ", 400)
	body, _ := json.Marshal(m)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parsePayload("pull_request", body); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseMatchesEncodingJSON: the single-pass parse accepts every payload
// encoding/json accepts, and reads the same values from it when no name
// differs from a field's only in case (encoding/json matches names ignoring
// case, the parse as GitHub spells them).
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, name := range []string{"issues-opened", "pull_request-opened", "issue_comment-created"} {
		b, err := os.ReadFile("../testdata/payloads/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"action":"opened","Action":"x","issue":{"number":1,"title":"\xff\u0000","labels":null,"updated_at":5}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var want payload
		if json.Unmarshal(body, &want) != nil {
			return
		}
		want.liftRepository()
		want.clean()
		got, err := parsePayload("issues", body)
		if err != nil {
			t.Fatalf("encoding/json accepts it, the parse fails: %v", err)
		}
		if bytes.IndexFunc(body, unicode.IsUpper) < 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("parsed %+v, encoding/json %+v", got, want)
		}
	})
}
