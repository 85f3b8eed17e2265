package main

import (
	"bytes"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

// fixtures are copies of files in testdata/payloads/ (go:embed cannot reach
// outside this directory); TestFixturesMatchTestdata keeps them identical.
// An embed.FS is read-only.
//
//go:embed payloads/*.json
var fixtures embed.FS

// DefaultBodySize is the size deliveries are padded to when smaller: GitHub's
// issue and pull request deliveries are compact JSON of 15 to 25 KB, and
// webhook.BenchmarkHandler uses the same 20 KiB.
const DefaultBodySize = 20 << 10

// deliveryKind is the GitHub delivery a request imitates.
type deliveryKind int

// The kinds of delivery. Opened ones start a subject; the other two are what
// GitHub sends about a subject that is already open, so for a subject with a
// live item they are subject collisions.
const (
	// issueOpened is issues/opened: a new issue subject.
	issueOpened deliveryKind = iota
	// prOpened is pull_request/opened: a new pull request subject with a
	// head branch of its own.
	prOpened
	// issueCommand is issue_comment/created with "/gitlease run" from the
	// repository owner, on an open issue.
	issueCommand
	// prSynchronize is pull_request/synchronize: a new head commit pushed
	// to an open pull request.
	prSynchronize
	numKinds
)

// fixture returns the X-GitHub-Event of k and the fixture it is made from.
func (k deliveryKind) fixture() (event, file string) {
	switch k {
	case issueOpened:
		return "issues", "issues-opened.json"
	case prOpened:
		return "pull_request", "pull_request-opened.json"
	case issueCommand:
		return "issue_comment", "issue_comment-created.json"
	default:
		return "pull_request", "pull_request-synchronize.json"
	}
}

// event is the X-GitHub-Event header of k.
func (k deliveryKind) event() string {
	e, _ := k.fixture()
	return e
}

// isPR reports whether k is about a pull request subject.
func (k deliveryKind) isPR() bool { return k == prOpened || k == prSynchronize }

// String names k as "<event>.<action>".
func (k deliveryKind) String() string {
	switch k {
	case issueOpened:
		return "issues.opened"
	case prOpened:
		return "pull_request.opened"
	case issueCommand:
		return "issue_comment.created"
	default:
		return "pull_request.synchronize"
	}
}

// delivery identifies one delivery: its ID and everything its body is
// rendered from. Rendering is deterministic, so a redelivery re-renders the
// identical bytes instead of keeping them.
type delivery struct {
	ID     string
	Kind   deliveryKind
	Repo   int // index of the run's repository, 0 <= Repo < generator.repos
	Number int // issue or pull request number, unique in the run
	// Rev is the pull request's head revision: 0 when opened, k for the
	// k-th synchronize.
	Rev int
}

// Template tokens: placeholders in a fixture turned template, replaced per
// delivery. The numeric ones stand where JSON numbers go, so the template
// is made with json.Marshal; none occurs in the fixtures.
const (
	tokNumber = "914159265"  // the issue or pull request number
	tokRepoID = "927182818"  // the repository ID
	tokName   = "@@NAME@@"   // the repository name (the owner stays octocat)
	tokSHA    = "@@SHA@@"    // the pull request's head commit
	tokBefore = "@@BEFORE@@" // its previous head commit (synchronize)
)

// tokens lists the placeholders, in the index order template.toks uses.
func tokens() []string { return []string{tokNumber, tokRepoID, tokName, tokSHA, tokBefore} }

// template is a delivery body split at its placeholders: lits[0] toks[0]
// lits[1] toks[1] ... lits[n].
type template struct {
	lits []string
	toks []int
}

// parseTemplate splits b at every placeholder.
func parseTemplate(b []byte) template {
	toks := tokens()
	s := string(b)
	var t template
	for {
		at, which := -1, -1
		for i, tok := range toks {
			if j := strings.Index(s, tok); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			t.lits = append(t.lits, s)
			return t
		}
		t.lits = append(t.lits, s[:at])
		t.toks = append(t.toks, which)
		s = s[at+len(toks[which]):]
	}
}

// render appends the template with vals (indexed like tokens()) to dst.
func (t template) render(dst []byte, vals []string) []byte {
	for i, tok := range t.toks {
		dst = append(dst, t.lits[i]...)
		dst = append(dst, vals[tok]...)
	}
	return append(dst, t.lits[len(t.lits)-1]...)
}

// generator renders realistic delivery bodies for one run: issues and pull
// requests of repos repositories owned by octocat, named
// load-<run>-<index>, with IDs from repoBase up. It is immutable once made
// and safe for concurrent use.
type generator struct {
	run      string
	repoBase int64
	repos    int
	tmpl     [numKinds]template
	size     [numKinds]int // rendered size of a typical delivery
}

// newGenerator makes the templates. The issue and pull request bodies are
// padded with prose drawn from seed so a typical delivery is about size
// bytes (none is shortened: GitHub's pull request fixture is already over
// 20 KiB). run names the repositories, repoBase numbers them.
func newGenerator(seed uint64, run string, repoBase int64, repos, size int) (*generator, error) {
	if repos < 1 {
		return nil, fmt.Errorf("need at least one repository, got %d", repos)
	}
	g := &generator{run: run, repoBase: repoBase, repos: repos}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6164)) // "load"
	pad := prose(rng, 64<<10)
	for k := range numKinds {
		sample := delivery{ID: "00000000-0000-0000-0000-000000000000", Kind: k, Repo: repos - 1, Number: 1_000_000, Rev: 1}
		n := 0
		for range 5 {
			b, err := makeTemplate(k, pad[:n])
			if err != nil {
				return nil, err
			}
			g.tmpl[k] = parseTemplate(b)
			g.size[k] = len(g.body(sample))
			if g.size[k] >= size || n+size-g.size[k] > len(pad) {
				break
			}
			// JSON escapes (a newline is \n) make the growth not quite linear;
			// a few rounds converge.
			n += size - g.size[k]
		}
	}
	return g, nil
}

// body renders d's delivery body.
func (g *generator) body(d delivery) []byte {
	vals := []string{
		strconv.Itoa(d.Number),
		strconv.FormatInt(g.repoID(d.Repo), 10),
		g.repoName(d.Repo),
		g.headSHA(d, d.Rev),
		g.headSHA(d, max(d.Rev-1, 0)),
	}
	t := g.tmpl[d.Kind]
	return t.render(make([]byte, 0, g.size[d.Kind]+64), vals)
}

// repoID is the repository ID of repository index i.
func (g *generator) repoID(i int) int64 { return g.repoBase + int64(i) }

// repoName is the name (without owner) of repository index i.
func (g *generator) repoName(i int) string { return "load-" + g.run + "-" + strconv.Itoa(i) }

// headSHA is a pull request's head commit at revision rev: a stable
// 40-hex-digit name derived from the run, repository, number and rev.
func (g *generator) headSHA(d delivery, rev int) string {
	sum := sha1.Sum(fmt.Appendf(nil, "%s/%d/%d/%d", g.run, d.Repo, d.Number, rev))
	return hex.EncodeToString(sum[:])
}

// headRefPrefix starts the head branch (without refs/heads/) of every pull
// request the tool makes up; the pull request number follows, so no two
// share a reservation.
const headRefPrefix = "gitlease-load/pr-"

// makeTemplate turns k's fixture into a compact template: the number,
// repository and head commit become placeholders, the pull request gets a
// head branch of its own, and pad is appended to the issue's or pull
// request's body text.
func makeTemplate(k deliveryKind, pad string) ([]byte, error) {
	_, file := k.fixture()
	raw, err := fixtures.ReadFile("payloads/" + file)
	if err != nil {
		return nil, fmt.Errorf("read fixture %s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode fixture %s: %w", file, err)
	}
	subject, _ := m["issue"].(map[string]any)
	if k.isPR() {
		subject, _ = m["pull_request"].(map[string]any)
	}
	repo, _ := m["repository"].(map[string]any)
	if subject == nil || repo == nil {
		return nil, fmt.Errorf("fixture %s lacks its issue, pull request or repository", file)
	}
	var f fixtureFacts
	f.number, _ = subject["number"].(json.Number)
	f.repoID, _ = repo["id"].(json.Number)
	if k.isPR() {
		head, _ := subject["head"].(map[string]any)
		if head == nil {
			return nil, fmt.Errorf("fixture %s lacks pull_request.head", file)
		}
		f.sha, _ = head["sha"].(string)
		f.before, _ = m["before"].(string)
	}
	if f.number == "" || f.repoID == "" {
		return nil, fmt.Errorf("fixture %s lacks a number or repository id", file)
	}
	f.urlNumber = regexp.MustCompile(`/(issues|pulls|pull)/` + regexp.QuoteMeta(f.number.String()) + `\b`)
	m = tokenize(m, f).(map[string]any)

	// Re-read the (tokenized) subject and set its own head branch and body.
	subject, _ = m["issue"].(map[string]any)
	if k.isPR() {
		subject, _ = m["pull_request"].(map[string]any)
		head := subject["head"].(map[string]any)
		head["ref"] = headRefPrefix + tokNumber
		head["label"] = "octocat:" + head["ref"].(string)
	}
	if pad != "" {
		body, _ := subject["body"].(string)
		subject["body"] = body + "\n\n" + pad
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // GitHub does not escape <, > and &
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode template %s: %w", file, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// fixtureFacts are the values in a fixture that become placeholders.
type fixtureFacts struct {
	number, repoID json.Number
	sha, before    string
	urlNumber      *regexp.Regexp
}

// tokenize replaces f's values in v by placeholders: the number and the
// repository ID where they are JSON numbers, and in strings the repository
// name, the number in issue and pull request URLs, the repository ID and
// the head commits.
func tokenize(v any, f fixtureFacts) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = tokenize(e, f)
		}
	case []any:
		for i, e := range x {
			x[i] = tokenize(e, f)
		}
	case json.Number:
		switch x {
		case f.number:
			return json.Number(tokNumber)
		case f.repoID:
			return json.Number(tokRepoID)
		}
	case string:
		s := strings.ReplaceAll(x, "Hello-World", tokName)
		s = f.urlNumber.ReplaceAllString(s, "/${1}/"+tokNumber)
		s = strings.ReplaceAll(s, f.repoID.String(), tokRepoID)
		if f.sha != "" {
			s = strings.ReplaceAll(s, f.sha, tokSHA)
		}
		if f.before != "" {
			s = strings.ReplaceAll(s, f.before, tokBefore)
		}
		return s
	}
	return v
}

// prose returns n bytes of made-up Markdown, the kind of text an issue or
// pull request description holds: paragraphs, lists and code blocks. It
// compresses about as well as real text does, unlike a run of one letter,
// so PostgreSQL's TOAST compression does not flatter the measurement.
func prose(rng *rand.Rand, n int) string {
	words := strings.Fields(`the a to of and in is that for it on with as this be are
		from by at an not or have we should when which will can if but all
		queue worker lease delivery webhook branch commit test build retry timeout
		error config handler request response database transaction index payload
		subject generation reservation outcome replay collision item pending
		assigned held completed cancelled server client process memory latency
		throughput signature secret event action repository pull issue comment
		label review merge rebase deploy release version docs example fix add
		remove update rename refactor migrate check verify parse encode decode`)
	var b strings.Builder
	b.Grow(n + 256)
	sentence := func() {
		k := 6 + rng.IntN(14)
		for i := range k {
			w := words[rng.IntN(len(words))]
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
		b.WriteString(". ")
	}
	for b.Len() < n {
		switch r := rng.IntN(10); {
		case r < 6:
			for range 3 + rng.IntN(4) {
				sentence()
			}
			b.WriteString("\n\n")
		case r < 8:
			for range 2 + rng.IntN(4) {
				b.WriteString("- ")
				sentence()
				b.WriteString("\n")
			}
			b.WriteString("\n")
		case r < 9:
			fmt.Fprintf(&b, "```go\nfunc %s%d(ctx context.Context) error {\n\treturn %s(ctx, %d)\n}\n```\n\n",
				words[rng.IntN(len(words))], rng.IntN(1000), words[rng.IntN(len(words))], rng.IntN(100))
		default:
			b.WriteString("###")
			for range 2 + rng.IntN(3) {
				b.WriteString(" " + words[rng.IntN(len(words))])
			}
			b.WriteString("\n\n")
		}
	}
	return b.String()[:n]
}
