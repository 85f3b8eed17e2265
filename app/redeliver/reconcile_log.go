package redeliver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	gh "github.com/google/go-github/v66/github"
)

// listAttempts pages the delivery log, newest first, 100 at a time, until
// it reaches an attempt delivered before from, and returns the attempts
// from then on, newest first.
func listAttempts(ctx context.Context, client *gh.Client, from time.Time) ([]*gh.HookDelivery, int, error) {
	opts := &gh.ListCursorOptions{PerPage: 100}
	var out []*gh.HookDelivery
	for pages := 1; ; pages++ {
		page, resp, err := client.Apps.ListHookDeliveries(ctx, opts)
		if err != nil {
			return out, pages, fmt.Errorf("list the App's webhook deliveries (GET /app/hook/deliveries, page %d): %w", pages, err)
		}
		reached := false
		for _, d := range page {
			if d.GetDeliveredAt().Before(from) {
				reached = true
				continue
			}
			out = append(out, d)
		}
		if reached || len(page) == 0 || resp.Cursor == "" {
			return out, pages, nil
		}
		opts.Cursor = resp.Cursor
	}
}

// attemptGroup is every attempt of one guid in the scanned window.
type attemptGroup struct {
	guid   string
	newest *gh.HookDelivery
	n      int
	ok     bool
}

func groupAttempts(attempts []*gh.HookDelivery) map[string]*attemptGroup {
	groups := map[string]*attemptGroup{}
	for _, a := range attempts {
		g := groups[a.GetGUID()]
		if g == nil {
			g = &attemptGroup{guid: a.GetGUID(), newest: a}
			groups[g.guid] = g
		}
		g.n++
		if a.GetID() > g.newest.GetID() {
			g.newest = a
		}
		if a.GetStatus() == "OK" {
			g.ok = true
		}
	}
	return groups
}

func (g *attemptGroup) finding() Finding {
	a := g.newest
	return Finding{
		GUID: g.guid, Event: a.GetEvent(), Action: a.GetAction(), AttemptID: a.GetID(),
		StatusCode: a.GetStatusCode(), Status: a.GetStatus(), DeliveredAt: a.GetDeliveredAt().Time, Attempts: g.n,
	}
}

// rejectedAsBadInput reports whether gitlease answered a delivery as bad
// input (docs/webhook.md): a redelivery would only be refused again.
func rejectedAsBadInput(statusCode int) bool {
	switch statusCode {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusConflict, http.StatusRequestEntityTooLarge:
		return true
	}
	return false
}
