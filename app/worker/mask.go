package worker

import (
	"slices"
	"strings"
	"sync"
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

// tailBuffer keeps the end of a command's combined output, of which only
// the last max bytes go into the check run, masked: it holds the longest
// secret's length more, so a secret cut by the kept window's start is
// masked whole before the cut.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	mask    *masker
	buf     []byte
	dropped bool
}

func newTailBuffer(max int, m *masker) *tailBuffer {
	return &tailBuffer{max: max, mask: m}
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max - t.mask.longest(); over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	return len(p), nil
}

// String is the tail as text Postgres and GitHub accept: masked, valid
// UTF-8, no NUL bytes, and, when earlier output was dropped, starting at a
// line.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	s := t.mask.apply(string(t.buf))
	dropped := t.dropped
	t.mu.Unlock()
	if over := len(s) - t.max; over > 0 {
		s, dropped = s[over:], true
	}
	if i := strings.IndexByte(s, '\n'); dropped && i >= 0 && i < len(s)-1 {
		s = s[i+1:]
	}
	s = strings.ReplaceAll(strings.ToValidUTF8(s, ""), "\x00", "")
	return strings.TrimRight(s, "\n")
}
