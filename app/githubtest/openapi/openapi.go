// Package openapi checks requests against GitHub's own REST description:
// the request-body and query-parameter schemas of the operations the fake
// GitHub (package githubtest) serves, from the embedded extract
// requests.json (see README.md), answered in the words GitHub's validation
// uses.
package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed requests.json
var requestsJSON []byte

// Operation is one operation of the embedded OpenAPI extract.
type Operation struct {
	OperationID      string             `json:"operation_id"`
	DocumentationURL string             `json:"documentation_url"`
	Query            map[string]*Schema `json:"query"`
	Body             *Schema            `json:"body"`
}

// Schema is the subset of JSON Schema GitHub's description uses for the
// request bodies and query parameters the fake validates.
type Schema struct {
	Type                 any                `json:"type"` // string or []string
	Properties           map[string]*Schema `json:"properties"`
	Required             []string           `json:"required"`
	Enum                 []any              `json:"enum"`
	Items                *Schema            `json:"items"`
	MaxItems             *int               `json:"maxItems"`
	MinItems             *int               `json:"minItems"`
	MaxLength            *int               `json:"maxLength"`
	MinLength            *int               `json:"minLength"`
	Minimum              *float64           `json:"minimum"`
	Maximum              *float64           `json:"maximum"`
	Format               string             `json:"format"`
	AnyOf                []*Schema          `json:"anyOf"`
	OneOf                []*Schema          `json:"oneOf"`
	AllOf                []*Schema          `json:"allOf"`
	Nullable             bool               `json:"nullable"`
	AdditionalProperties any                `json:"additionalProperties"`
}

// Load parses the embedded extract, keyed by the operation names
// extract.py lists. Each caller gets its own copy: the package keeps no
// mutable state.
func Load() (map[string]*Operation, error) {
	var doc struct {
		Source     string                `json:"source"`
		Operations map[string]*Operation `json:"operations"`
	}
	if err := json.Unmarshal(requestsJSON, &doc); err != nil {
		return nil, fmt.Errorf("openapi: embedded requests.json: %w", err)
	}
	return doc.Operations, nil
}

// DecodeJSON decodes a request body the way the validator needs it: numbers
// kept as json.Number so integers and fractions can be told apart.
func DecodeJSON(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

// Validate checks v against sc and returns GitHub-style problem lines
// ("\"head\" wasn't supplied.", "For 'properties/draft', \"yes\" is not a
// boolean."), empty when v is valid.
func Validate(sc *Schema, v any) []string {
	var probs []string
	validateAt(sc, v, "", &probs)
	return probs
}

func validateAt(sc *Schema, v any, at string, probs *[]string) {
	if sc == nil {
		return
	}
	where := func() string {
		if at == "" {
			return "For the request body"
		}
		return "For '" + at + "'"
	}
	if v == nil {
		if sc.Nullable || typeAllows(sc.Type, "null") {
			return
		}
		if sc.Type != nil {
			*probs = append(*probs, fmt.Sprintf("%s, nil is not %s.", where(), typeNoun(sc.Type)))
		}
		return
	}
	if sc.Type != nil && !typeAllows(sc.Type, jsonType(v)) {
		*probs = append(*probs, fmt.Sprintf("%s, %s is not %s.", where(), show(v), typeNoun(sc.Type)))
		return
	}
	if len(sc.Enum) > 0 && !inEnum(sc.Enum, v) {
		*probs = append(*probs, fmt.Sprintf("%s, %s is not a member of %s.", where(), show(v), showEnum(sc.Enum)))
	}
	switch x := v.(type) {
	case string:
		n := len([]rune(x))
		if sc.MaxLength != nil && n > *sc.MaxLength {
			*probs = append(*probs, fmt.Sprintf("%s, the string is too long (%d characters, maximum is %d).", where(), n, *sc.MaxLength))
		}
		if sc.MinLength != nil && n < *sc.MinLength {
			*probs = append(*probs, fmt.Sprintf("%s, the string is too short (%d characters, minimum is %d).", where(), n, *sc.MinLength))
		}
		if sc.Format == "date-time" {
			if _, err := time.Parse(time.RFC3339, x); err != nil {
				*probs = append(*probs, fmt.Sprintf("%s, %s is not a valid date-time (ISO 8601, YYYY-MM-DDTHH:MM:SSZ).", where(), show(v)))
			}
		}
	case json.Number:
		f, _ := x.Float64()
		if sc.Minimum != nil && f < *sc.Minimum {
			*probs = append(*probs, fmt.Sprintf("%s, %s is less than the minimum of %v.", where(), x, *sc.Minimum))
		}
		if sc.Maximum != nil && f > *sc.Maximum {
			*probs = append(*probs, fmt.Sprintf("%s, %s is greater than the maximum of %v.", where(), x, *sc.Maximum))
		}
	case []any:
		if sc.MaxItems != nil && len(x) > *sc.MaxItems {
			*probs = append(*probs, fmt.Sprintf("%s, the array has %d items (maximum is %d).", where(), len(x), *sc.MaxItems))
		}
		if sc.MinItems != nil && len(x) < *sc.MinItems {
			*probs = append(*probs, fmt.Sprintf("%s, the array has %d items (minimum is %d).", where(), len(x), *sc.MinItems))
		}
		for i, item := range x {
			validateAt(sc.Items, item, join(at, "items/"+strconv.Itoa(i)), probs)
		}
	case map[string]any:
		for _, req := range sc.Required {
			if _, ok := x[req]; !ok {
				if at == "" {
					*probs = append(*probs, fmt.Sprintf("%q wasn't supplied.", req))
				} else {
					*probs = append(*probs, fmt.Sprintf("%s, %q wasn't supplied.", where(), req))
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := sc.Properties[k]; ok {
				validateAt(ps, x[k], join(at, "properties/"+k), probs)
			} else if ap, ok := sc.AdditionalProperties.(bool); ok && !ap {
				*probs = append(*probs, fmt.Sprintf("%s, %q is not a permitted key.", where(), k))
			}
		}
	}
	for _, sub := range sc.AllOf {
		validateAt(sub, v, at, probs)
	}
	if len(sc.AnyOf) > 0 {
		matched := 0
		for _, sub := range sc.AnyOf {
			if len(Validate(sub, v)) == 0 {
				matched++
				break
			}
		}
		if matched == 0 {
			*probs = append(*probs, fmt.Sprintf("%s, no subschema in \"anyOf\" matched%s.", where(), anyOfHint(sc.AnyOf, v)))
		}
	}
	if len(sc.OneOf) > 0 {
		matched := 0
		for _, sub := range sc.OneOf {
			if len(Validate(sub, v)) == 0 {
				matched++
			}
		}
		if matched != 1 {
			*probs = append(*probs, fmt.Sprintf("%s, %d subschemas in \"oneOf\" matched (exactly one must).", where(), matched))
		}
	}
}

// anyOfHint explains the most likely failed alternative: the problems of
// the alternative whose constraints on present keys match.
func anyOfHint(alts []*Schema, v any) string {
	best := ""
	for _, alt := range alts {
		p := Validate(alt, v)
		if len(p) > 0 && (best == "" || len(strings.Join(p, " ")) < len(best)) {
			best = strings.Join(p, " ")
		}
	}
	if best == "" {
		return ""
	}
	return " (" + strings.TrimSuffix(best, ".") + ")"
}

func join(at, sub string) string {
	if at == "" {
		return sub
	}
	return at + "/" + sub
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func typeAllows(t any, got string) bool {
	switch x := t.(type) {
	case nil:
		return true
	case string:
		return x == got || (x == "number" && got == "integer")
	case []any:
		for _, e := range x {
			if typeAllows(e, got) {
				return true
			}
		}
	}
	return false
}

func typeNoun(t any) string {
	switch x := t.(type) {
	case string:
		switch x {
		case "integer", "object", "array":
			return "an " + x
		}
		return "a " + x
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, typeNoun(e))
		}
		return strings.Join(parts, " or ")
	}
	return "valid"
}

func inEnum(enum []any, v any) bool {
	for _, e := range enum {
		switch ev := e.(type) {
		case string:
			if s, ok := v.(string); ok && s == ev {
				return true
			}
		case float64:
			if n, ok := v.(json.Number); ok {
				if f, err := n.Float64(); err == nil && f == ev {
					return true
				}
			}
		case bool:
			if b, ok := v.(bool); ok && b == ev {
				return true
			}
		case nil:
			if v == nil {
				return true
			}
		}
	}
	return false
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

func showEnum(enum []any) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		parts[i] = show(e)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// ValidateQuery checks the query parameters the operation declares (unknown
// parameters are ignored, as GitHub ignores them).
func ValidateQuery(op *Operation, q url.Values) []string {
	var probs []string
	names := make([]string, 0, len(op.Query))
	for name := range op.Query {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		vals, ok := q[name]
		if !ok {
			continue
		}
		sc := op.Query[name]
		for _, raw := range vals {
			var v any = raw
			if typeAllows(sc.Type, "integer") && !typeAllows(sc.Type, "string") {
				if _, err := strconv.ParseInt(raw, 10, 64); err != nil {
					probs = append(probs, fmt.Sprintf("For '%s', %q is not an integer.", name, raw))
					continue
				}
				v = json.Number(raw)
			}
			validateAt(sc, v, name, &probs)
		}
	}
	return probs
}

// InvalidRequest formats problems the way GitHub's schema validation does.
func InvalidRequest(probs []string) string {
	return "Invalid request.\n\n" + strings.Join(probs, "\n")
}
