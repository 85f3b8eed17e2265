package githubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gitlease/gitlease/app/githubtest/openapi"
)

// The request pipeline: authentication, schema checks, faults, rate
// limits, the handler, and the answer.

type authKind int

const (
	authNone authKind = iota
	authJWT
	authInstallation
)

// route is one served endpoint.
type route struct {
	kind    Kind
	pattern string // http.ServeMux pattern
	op      string // key into openapi/requests.json
	auth    authKind
	match   func(*http.Request) bool // extra condition on the path, nil for none
	perm    string                   // installation permission needed (repository routes)
	write   bool
	handle  func(*call) response
}

// call is the state of one request as a handler sees it.
type call struct {
	s     *Server
	r     *http.Request
	rt    *route
	op    *openapi.Operation
	body  []byte
	json  map[string]any // the decoded body, for routes with a body schema
	app   *app
	tok   *token
	repo  *repo
	now   time.Time
	viols []string
}

// violatef records a violation: a request GitHub rejects that the client
// should not have sent.
func (c *call) violatef(format string, args ...any) {
	c.viols = append(c.viols, fmt.Sprintf(format, args...))
}

// response is what a handler answers.
type response struct {
	status int
	body   any
	header map[string]string
}

func (c *call) doc() string {
	if c.op != nil && c.op.DocumentationURL != "" {
		return c.op.DocumentationURL
	}
	return docsREST
}

func errorBody(status int, msg, doc string) map[string]any {
	return map[string]any{"message": msg, "documentation_url": doc, "status": strconv.Itoa(status)}
}

// fail answers status with GitHub's {"message","documentation_url"} body.
func (c *call) fail(status int, msg string) response {
	return response{status: status, body: errorBody(status, msg, c.doc())}
}

// notFound answers GitHub's 404.
func (c *call) notFound() response { return c.fail(http.StatusNotFound, "Not Found") }

// fieldError is one entry of the "errors" array of a GitHub 422 "Validation
// Failed" body.
type fieldError struct {
	Resource string `json:"resource,omitempty"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}

// validationFailed answers GitHub's 422 {"message":"Validation Failed","errors":[...]}.
func (c *call) validationFailed(errs ...fieldError) response {
	b := errorBody(http.StatusUnprocessableEntity, "Validation Failed", c.doc())
	b["errors"] = errs
	return response{status: http.StatusUnprocessableEntity, body: b}
}

// invalid answers GitHub's 422 for a request its schema validation rejects.
func (c *call) invalid(probs ...string) response {
	return c.fail(http.StatusUnprocessableEntity, openapi.InvalidRequest(probs))
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, rt *route) {
	arrived := time.Now()
	if s.cfg.latency > 0 {
		time.Sleep(s.cfg.latency)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 50<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	c := &call{s: s, r: r, rt: rt, body: body, now: time.Now()}
	kind := KindUnknown
	if rt != nil {
		kind = rt.kind
		c.op = s.ops[rt.op]
	}
	s.reqSeq++
	reqID := fmt.Sprintf("F4KE:%04X:%06X", s.reqSeq>>16, s.reqSeq)
	res, fault, identity := s.process(c, kind)
	s.checkScope(c, identity, arrived)
	s.recordScope(identity, fault, res, time.Now())
	s.counts[kind]++
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json; charset=utf-8")
	hdr.Set("X-GitHub-Request-Id", reqID)
	hdr.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
	s.rateHeaders(hdr, identity, c.now, res)
	for k, v := range res.header {
		hdr.Set(k, v)
	}
	var out []byte
	if res.body != nil {
		out, _ = json.Marshal(res.body)
	}
	rec := Request{
		Time: c.now, Kind: kind, Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Body: body, Status: res.status, Response: out, Fault: fault,
	}
	if c.tok != nil {
		rec.InstallationID = c.tok.installationID
	}
	s.requests = append(s.requests, rec)
	for _, v := range c.viols {
		s.reportViolation(Violation{Method: r.Method, Path: r.URL.RequestURI(), Kind: kind, Status: res.status, Message: v})
	}
	s.mu.Unlock()

	for k, vs := range hdr {
		w.Header()[k] = vs
	}
	w.WriteHeader(res.status)
	if out != nil {
		_, _ = w.Write(out)
	}
}

// process runs the pipeline for one request with s.mu held: authentication,
// repository access, query and body validation, rate limits and faults, then
// the handler. It returns the response, the fault applied ("" for none) and
// the rate-limit identity.
func (s *Server) process(c *call, kind Kind) (res response, fault, identity string) {
	r := c.r
	identity = "anonymous"
	if c.rt == nil {
		c.violatef("unexpected request %s %s: the fake does not serve it (GitHub answers 404 for an unknown route; add the route to githubtest if gitlease needs it)", r.Method, r.URL.Path)
		return response{status: http.StatusNotFound, body: errorBody(http.StatusNotFound, "Not Found", docsREST)}, "", identity
	}
	// Authentication.
	switch c.rt.auth {
	case authJWT:
		a, msg := s.verifyJWT(r.Header.Get("Authorization"), c.now)
		if msg != "" {
			c.violatef("App JWT rejected: %s", msg)
			return c.fail(http.StatusUnauthorized, msg), "", identity
		}
		c.app = a
		identity = "app:" + strconv.FormatInt(a.id, 10)
	case authInstallation:
		tok, res, ok := s.authToken(c)
		if !ok {
			return res, "", identity
		}
		c.tok = tok
		identity = "installation:" + strconv.FormatInt(tok.installationID, 10)
		if res, ok := s.resolveRepo(c); !ok {
			return res, "", identity
		}
	}
	// Query and body validation against GitHub's OpenAPI description.
	if probs := openapi.ValidateQuery(c.op, r.URL.Query()); len(probs) > 0 {
		c.violatef("query rejected by GitHub's schema: %s", strings.Join(probs, " "))
		return c.invalid(probs...), "", identity
	}
	if c.op.Body != nil {
		if len(bytes.TrimSpace(c.body)) == 0 {
			if len(c.op.Body.Required) > 0 {
				c.violatef("empty body, GitHub requires %v", c.op.Body.Required)
				return c.invalid(fmt.Sprintf("%q wasn't supplied.", c.op.Body.Required[0])), "", identity
			}
			c.json = map[string]any{}
		} else {
			v, err := openapi.DecodeJSON(c.body)
			if err == nil && v == nil { // "null", as go-github sends for no options
				v = map[string]any{}
			}
			if err != nil {
				c.violatef("body is not JSON: %v", err)
				return c.fail(http.StatusBadRequest, "Problems parsing JSON"), "", identity
			}
			obj, ok := v.(map[string]any)
			if !ok {
				c.violatef("body is not a JSON object")
				return c.fail(http.StatusBadRequest, "Body should be a JSON object"), "", identity
			}
			if probs := openapi.Validate(c.op.Body, obj); len(probs) > 0 {
				c.violatef("body rejected by GitHub's schema: %s", strings.Join(probs, " "))
				return c.invalid(probs...), "", identity
			}
			c.json = obj
		}
	}
	// Rate limits and injected faults, before any effect.
	if res, ok := s.chargeRate(c, identity); !ok {
		return res, "primary_rate_limit", identity
	}
	f := s.faults.take(kind)
	if f != nil && f.kind != faultLost {
		return s.faultResponse(c, f), f.name(), identity
	}
	res = c.rt.handle(c)
	if f != nil { // applied, then the response is lost
		return s.faultResponse(c, f), f.name(), identity
	}
	return res, "", identity
}

// reportViolation records v and fails the test unless the server is lenient.
func (s *Server) reportViolation(v Violation) {
	s.violations = append(s.violations, v)
	if !s.cfg.lenient {
		s.tb.Errorf("githubtest: GitHub would reject %s %s with %d: %s", v.Method, v.Path, v.Status, v.Message)
	}
}

// ---- rate limits ----

type rateBucket struct {
	reset time.Time
	used  int
}

func (s *Server) bucket(identity string, now time.Time) *rateBucket {
	b := s.rate[identity]
	if b == nil || !now.Before(b.reset) {
		b = &rateBucket{reset: now.Add(s.cfg.rateWindow).Truncate(time.Second)}
		s.rate[identity] = b
	}
	return b
}

// chargeRate counts the request against its identity's primary limit and
// refuses it (403, remaining 0) when the limit, or an injected primary
// limit, is exhausted.
func (s *Server) chargeRate(c *call, identity string) (response, bool) {
	b := s.bucket(identity, c.now)
	if c.tok != nil && s.faults.primaryActive(c.now) {
		s.faults.primary.n--
		return s.primaryResponse(c, s.faults.primary.reset), false
	}
	if b.used >= s.cfg.rateLimit {
		return s.primaryResponse(c, b.reset), false
	}
	b.used++
	return response{}, true
}

func (s *Server) primaryResponse(c *call, reset time.Time) response {
	msg := "API rate limit exceeded"
	if c.tok != nil {
		msg = fmt.Sprintf("API rate limit exceeded for installation ID %d.", c.tok.installationID)
	}
	return response{
		status: http.StatusForbidden,
		body:   errorBody(http.StatusForbidden, msg, "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-rate-limits"),
		header: map[string]string{
			"X-RateLimit-Remaining": "0",
			"X-RateLimit-Reset":     strconv.FormatInt(reset.Unix(), 10),
		},
	}
}

// rateHeaders sets the x-ratelimit-* headers GitHub sends on every response.
func (s *Server) rateHeaders(h http.Header, identity string, now time.Time, res response) {
	b := s.bucket(identity, now)
	remaining := s.cfg.rateLimit - b.used
	if remaining < 0 {
		remaining = 0
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.cfg.rateLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(b.reset.Unix(), 10))
	h.Set("X-RateLimit-Used", strconv.Itoa(b.used))
	h.Set("X-RateLimit-Resource", "core")
}
