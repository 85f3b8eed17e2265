package outbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/gitlease/gitlease/app/github"
)

// maxAnswer bounds an outbox row's recorded answer, in bytes.
const maxAnswer = 1024

// attempt is what one attempt at an outbox row did: whether one of its
// steps got through (made: its backoff starts over if a later one fails)
// and what GitHub answered each of its writes, in order, for the row's
// last_answer. It makes no call of its own: it only writes down answers
// the row's calls received.
type attempt struct {
	made    bool
	answers []string
}

// answered records one answer: its HTTP status (0: none to show) and
// what it said, such as "created check run 123 on <sha>".
func (a *attempt) answered(status int, format string, args ...any) {
	if a == nil {
		return
	}
	s := fmt.Sprintf(format, args...)
	if status != 0 {
		s = strconv.Itoa(status) + " " + s
	}
	a.answers = append(a.answers, s)
}

// failed records the answer that ended the attempt: GitHub's status, the
// request it refused and its message, or why there was no answer.
func (a *attempt) failed(err error) {
	if a == nil || err == nil {
		return
	}
	a.answers = append(a.answers, answerOf(err))
}

// answer is the row's last answer, bounded to maxAnswer bytes (cut on a
// UTF-8 boundary, marked with an ellipsis); nil when nothing was answered.
func (a *attempt) answer() *string {
	if a == nil || len(a.answers) == 0 {
		return nil
	}
	s := cutBytes(strings.Join(a.answers, "; "), maxAnswer, "…")
	return &s
}

// answerOf says what GitHub answered with err: "422 POST
// /repos/o/r/check-runs: Validation Failed (…)" for a refusal, the limit
// for a call the limiter held back, "no answer: …" for a call GitHub never
// answered (a connection error, a timeout), and err itself for anything
// decided without GitHub.
func answerOf(err error) string {
	var (
		response   *gh.ErrorResponse
		rate       *gh.RateLimitError
		abuse      *gh.AbuseRateLimitError
		limited    *github.LimitedError
		unanswered *url.Error
	)
	switch {
	case errors.As(err, &response) && response.Response != nil:
		return refusal(response.Response, refusalText(response))
	case errors.As(err, &rate) && rate.Response != nil:
		return refusal(rate.Response, rate.Message)
	case errors.As(err, &abuse) && abuse.Response != nil:
		return refusal(abuse.Response, abuse.Message)
	case errors.As(err, &limited):
		return "not sent: " + limited.Error()
	case errors.As(err, &unanswered), errors.Is(err, context.DeadlineExceeded):
		return "no answer: " + err.Error()
	}
	return err.Error() // decided without GitHub, or gitlease's own failure
}

// refusal renders one refused request: its status, method and path, and
// GitHub's message.
func refusal(resp *http.Response, message string) string {
	s := strconv.Itoa(resp.StatusCode)
	if r := resp.Request; r != nil && r.URL != nil {
		s += " " + r.Method + " " + r.URL.Path
	}
	if message = strings.TrimSpace(message); message != "" {
		s += ": " + message
	}
	return s
}

// statusOf is the HTTP status of a GitHub answer, 0 when there was none
// (the value came from a lookup an earlier answer made unnecessary).
func statusOf(resp *gh.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}

// refusalText is GitHub's message with its field errors: their message, or
// the field and code GitHub names.
func refusalText(r *gh.ErrorResponse) string {
	var fields []string
	for _, e := range r.Errors {
		if e.Message != "" {
			fields = append(fields, e.Message)
		} else if e.Field != "" || e.Code != "" {
			fields = append(fields, strings.TrimSpace(e.Field+" "+e.Code))
		}
	}
	if len(fields) == 0 {
		return r.Message
	}
	return r.Message + " (" + strings.Join(fields, ", ") + ")"
}
