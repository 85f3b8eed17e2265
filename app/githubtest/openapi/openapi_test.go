package openapi_test

import (
	"net/url"
	"slices"
	"testing"

	"github.com/gitlease/gitlease/app/githubtest/openapi"
)

// Requests are checked against GitHub's schemas and refused in GitHub's
// words; a valid one has no problems.
func TestValidate(t *testing.T) {
	ops, err := openapi.Load()
	if err != nil {
		t.Fatal(err)
	}
	const (
		createRef   = "POST /repos/{owner}/{repo}/git/refs"
		createPull  = "POST /repos/{owner}/{repo}/pulls"
		listPulls   = "GET /repos/{owner}/{repo}/pulls"
		createCheck = "POST /repos/{owner}/{repo}/check-runs"
	)
	for _, name := range []string{createRef, createPull, listPulls, createCheck} {
		if ops[name] == nil {
			t.Fatalf("the extract has no operation %q", name)
		}
	}
	bodies := []struct {
		name, op, body string
		want           []string
	}{
		{"valid", createRef, `{"ref": "refs/heads/x", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e"}`, nil},
		{"missing field", createRef, `{"ref": "refs/heads/x"}`, []string{`"sha" wasn't supplied.`}},
		{"wrong type", createPull, `{"head": "x", "base": "main", "draft": "yes"}`, []string{`For 'properties/draft', "yes" is not a boolean.`}},
		{"not an object", createRef, `[]`, []string{`For the request body, [] is not an object.`}},
	}
	for _, tc := range bodies {
		t.Run(tc.name, func(t *testing.T) {
			v, err := openapi.DecodeJSON([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := openapi.Validate(ops[tc.op].Body, v); !slices.Equal(got, tc.want) {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
	queries := []struct {
		name, query string
		want        []string
	}{
		{"valid", "state=open&per_page=100&unknown=ignored", nil},
		{"not an integer", "per_page=lots", []string{`For 'per_page', "lots" is not an integer.`}},
		{"not in the enum", "state=merged", []string{`For 'state', "merged" is not a member of ["open", "closed", "all"].`}},
	}
	for _, tc := range queries {
		t.Run("query "+tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			if got := openapi.ValidateQuery(ops[listPulls], q); !slices.Equal(got, tc.want) {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := openapi.DecodeJSON([]byte(`{} {}`)); err == nil {
		t.Error("a body with trailing data decoded")
	}
}
