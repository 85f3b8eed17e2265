package worker

import (
	"slices"
	"strings"
)

// minMasked is the shortest value masked: shorter ones ("1", "true")
// would mask ordinary output.
const minMasked = 8

// masker replaces secrets in what gitlease shows of a command's output
// (check run, logs, dashboard) with ***: the item's GITHUB_TOKEN and every
// GITLEASE_WORKER_ENV value of 8 characters or more.
type masker struct {
	r   *strings.Replacer
	max int
}

// newMasker masks values, the longest first (one may contain another).
func newMasker(values []string) *masker {
	var vs []string
	for _, v := range values {
		if len(v) >= minMasked && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	m := &masker{}
	if len(vs) == 0 {
		return m
	}
	m.max = len(vs[0])
	pairs := make([]string, 0, 2*len(vs))
	for _, v := range vs {
		pairs = append(pairs, v, "***")
	}
	m.r = strings.NewReplacer(pairs...)
	return m
}

// apply masks s.
func (m *masker) apply(s string) string {
	if m == nil || m.r == nil {
		return s
	}
	return m.r.Replace(s)
}

// longest is the length of the longest masked value.
func (m *masker) longest() int {
	if m == nil {
		return 0
	}
	return m.max
}

// passedValues are the values of base's variables that pass names (the
// first of each), which the command gets and which are masked.
func passedValues(base, pass []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(pass, k) && !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}
