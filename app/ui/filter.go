package ui

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/queue"
)

// The filters of the list pages, read from the query string. Each parser
// refuses what it cannot use with an error the page shows (400), rather
// than quietly listing everything.

var statuses = []string{queue.StatusPending, queue.StatusAssigned, queue.StatusHeld,
	queue.StatusCompleted, queue.StatusFailed, queue.StatusCancelled, queue.StatusDropped}

var outcomes = []string{"enqueued", "subject_collision", "reservation_collision", "cancelled", "ignored", "received"}

var (
	wordRE = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)
	repoRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$`)
)

// maxTime is the first page's cursor: later than every stored time.
var maxTime = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// itemFilter is the items page's query.
type itemFilter struct {
	Status, Repository, Subject, Kind string
	BeforeAt                          time.Time
	BeforeID                          uuid.UUID
	Paged                             bool // a cursor was given
}

// values is the filter as a query string, without the cursor.
func (f itemFilter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"status": f.Status, "repository": f.Repository, "subject": f.Subject, "kind": f.Kind} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func parseItemFilter(q url.Values) (itemFilter, error) {
	f := itemFilter{
		Status: strings.TrimSpace(q.Get("status")), Repository: strings.TrimSpace(q.Get("repository")),
		Subject: strings.TrimSpace(q.Get("subject")), Kind: strings.TrimSpace(q.Get("kind")),
		BeforeAt: maxTime, BeforeID: uuid.Max,
	}
	switch {
	case f.Status != "" && !slices.Contains(statuses, f.Status):
		return f, fmt.Errorf("status must be one of %s", strings.Join(statuses, ", "))
	case f.Repository != "" && !repoRE.MatchString(f.Repository):
		return f, fmt.Errorf("repository must be owner/name")
	case f.Kind != "" && !wordRE.MatchString(f.Kind):
		return f, fmt.Errorf("kind must be a subject kind such as github_issue")
	case f.Subject != "":
		if _, _, ok := queue.SplitQualifiedID(f.Subject); !ok || len(f.Subject) > 300 {
			return f, fmt.Errorf("subject must be a qualified ID, <kind>:<id>")
		}
	}
	if c := q.Get("before"); c != "" {
		at, rest, err := parseCursor(c)
		if err != nil {
			return f, err
		}
		id, err := uuid.Parse(rest)
		if err != nil {
			return f, fmt.Errorf("page cursor is malformed")
		}
		f.BeforeAt, f.BeforeID, f.Paged = at, id, true
	}
	return f, nil
}

// deliveryFilter is the deliveries page's query.
type deliveryFilter struct {
	Outcome, Event string
	BeforeAt       time.Time
	BeforeID       string
	Paged          bool
}

func (f deliveryFilter) values() url.Values {
	v := url.Values{}
	if f.Outcome != "" {
		v.Set("outcome", f.Outcome)
	}
	if f.Event != "" {
		v.Set("event", f.Event)
	}
	return v
}

func parseDeliveryFilter(q url.Values) (deliveryFilter, error) {
	f := deliveryFilter{Outcome: strings.TrimSpace(q.Get("outcome")), Event: strings.TrimSpace(q.Get("event")),
		BeforeAt: maxTime, BeforeID: "\U0010FFFF"}
	switch {
	case f.Outcome != "" && !slices.Contains(outcomes, f.Outcome):
		return f, fmt.Errorf("outcome must be one of %s", strings.Join(outcomes, ", "))
	case f.Event != "" && !wordRE.MatchString(f.Event):
		return f, fmt.Errorf("event must be a GitHub event name such as issues")
	}
	if c := q.Get("before"); c != "" {
		at, rest, err := parseCursor(c)
		if err != nil {
			return f, err
		}
		if rest == "" || len(rest) > 200 {
			return f, fmt.Errorf("page cursor is malformed")
		}
		f.BeforeAt, f.BeforeID, f.Paged = at, rest, true
	}
	return f, nil
}

// outboxFilter is the GitHub writes page's query.
type outboxFilter struct {
	Status  string // pending, failed or "" for both
	AfterID int64
	Paged   bool
}

func parseOutboxFilter(q url.Values) (outboxFilter, error) {
	f := outboxFilter{Status: strings.TrimSpace(q.Get("status"))}
	if f.Status != "" && f.Status != "pending" && f.Status != "failed" {
		return f, fmt.Errorf("status must be pending or failed")
	}
	if c := q.Get("after"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 0 {
			return f, fmt.Errorf("page cursor is malformed")
		}
		f.AfterID, f.Paged = n, true
	}
	return f, nil
}

// cursor renders a keyset position: "<unix microseconds>_<tie-breaker>".
func cursor(at time.Time, tie string) string {
	return strconv.FormatInt(at.UnixMicro(), 10) + "_" + tie
}

// parseCursor splits a cursor written by cursor.
func parseCursor(c string) (time.Time, string, error) {
	us, rest, ok := strings.Cut(c, "_")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || n < 0 || n > math.MaxInt64/2 {
		return time.Time{}, "", fmt.Errorf("page cursor is malformed")
	}
	return time.UnixMicro(n).UTC(), rest, nil
}
