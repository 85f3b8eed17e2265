package githubtest

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
	"strings"
)

// The fake's web side: a check run's page, roughly as GitHub shows it to a
// developer (its status, title, summary, details and annotations), so the
// documentation can show what gitlease writes. It is the fake's rendering,
// not GitHub's: Markdown is rendered only as far as gitlease's check runs
// use it (paragraphs and fenced code blocks), and the page says so.

// CheckRunPage renders check run id as an HTML page; false when there is
// no such check run. With Enterprise the fake also serves it at the check
// run's html_url (GET /{owner}/{repo}/runs/{id}, on the web root).
func (s *Server) CheckRunPage(id int64) ([]byte, bool) {
	cr, ok := s.CheckRun(id)
	if !ok {
		return nil, false
	}
	var b bytes.Buffer
	if err := checkRunTemplate.Execute(&b, checkRunView{CheckRun: cr, Summary: markdown(cr.Summary), Text: markdown(cr.Text)}); err != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// serveWeb answers a web page request outside the API's prefix
// (Enterprise); false when it is not one the fake has.
func (s *Server) serveWeb(w http.ResponseWriter, r *http.Request) bool {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || len(parts) != 4 || parts[2] != "runs" {
		return false
	}
	id, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		return false
	}
	page, ok := s.CheckRunPage(id)
	if !ok || !strings.EqualFold(s.checkRunRepo(id), parts[0]+"/"+parts[1]) {
		return false
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
	return true
}

func (s *Server) checkRunRepo(id int64) string {
	cr, _ := s.CheckRun(id)
	return cr.Repo
}

type checkRunView struct {
	CheckRun
	Summary, Text []block
}

// block is a paragraph or a fenced code block of a check run's Markdown.
type block struct {
	Code bool
	Body string
}

// markdown splits text into paragraphs and ``` fenced blocks.
func markdown(text string) []block {
	var out []block
	var para []string
	flush := func() {
		if p := strings.TrimSpace(strings.Join(para, "\n")); p != "" {
			out = append(out, block{Body: p})
		}
		para = nil
	}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "```") {
			flush()
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				code = append(code, lines[i])
			}
			out = append(out, block{Code: true, Body: strings.Join(code, "\n")})
			continue
		}
		if strings.TrimSpace(lines[i]) == "" {
			flush()
			continue
		}
		para = append(para, lines[i])
	}
	flush()
	return out
}

var checkRunTemplate = template.Must(template.New("check-run").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{{.Name}} · {{.Repo}}</title>
<style>
body{font:14px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1f2328;margin:0;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:12px 24px;font-weight:600}
main{max-width:960px;margin:24px auto;background:#fff;border:1px solid #d0d7de;border-radius:6px}
.head{padding:16px 24px;border-bottom:1px solid #d0d7de;display:flex;gap:12px;align-items:center}
.icon{font-size:22px;width:28px;text-align:center}
.success{color:#1a7f37}.failure,.timed_out,.action_required{color:#cf222e}.neutral,.cancelled,.skipped{color:#656d76}.pending{color:#9a6700}
h1{font-size:20px;margin:0}h2{font-size:16px;margin:24px 0 8px}
.meta{color:#656d76;font-size:12px}
section{padding:0 24px 16px}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:12px;overflow:auto;font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace}
.ann{border:1px solid #d0d7de;border-left:4px solid #9a6700;border-radius:6px;padding:8px 12px;margin:8px 0}
.ann.failure{border-left-color:#cf222e}.ann.notice{border-left-color:#0969da}
footer{max-width:960px;margin:0 auto 24px;color:#656d76;font-size:12px}
</style></head><body>
<header>{{.Repo}}</header>
<main>
<div class="head">
{{- if eq .Status "completed"}}<span class="icon {{.Conclusion}}">{{if eq .Conclusion "success"}}✓{{else if eq .Conclusion "failure"}}✗{{else}}●{{end}}</span>
{{- else}}<span class="icon pending">●</span>{{end}}
<div><h1>{{.Name}}</h1>
<div class="meta">{{if eq .Status "completed"}}{{.Conclusion}}{{else}}{{.Status}}{{end}} · head {{printf "%.7s" .HeadSHA}}{{if .DetailsURL}} · <a href="{{.DetailsURL}}">Details</a>{{end}}</div></div>
</div>
<section>
<h2>{{.Title}}</h2>
{{range .Summary}}{{if .Code}}<pre>{{.Body}}</pre>{{else}}<p>{{.Body}}</p>{{end}}{{end}}
{{if .Text}}<h2>Details</h2>{{range .Text}}{{if .Code}}<pre>{{.Body}}</pre>{{else}}<p>{{.Body}}</p>{{end}}{{end}}{{end}}
{{if .Annotations}}<h2>Annotations</h2>{{range .Annotations}}
<div class="ann {{.Level}}"><strong>{{.Title}}</strong> <span class="meta">{{.Level}} · {{.Path}}:{{.StartLine}}</span><div>{{.Message}}</div></div>{{end}}{{end}}
</section>
</main>
<footer>Rendered by gitlease's fake GitHub (app/githubtest) from the check run gitlease wrote to it; GitHub's own page lays the same fields out in its own style.</footer>
</body></html>
`))
