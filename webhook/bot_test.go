package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/gitlease/gitlease/webhook"
)

// flakyBot is a BotIdentity whose first failures answers fail, as GET /app
// does while GitHub is unreachable.
type flakyBot struct {
	mu    sync.Mutex
	fails int
	calls int
	login string
}

func (b *flakyBot) BotLogin(context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.calls <= b.fails {
		return "", errors.New("GET /app: 502 Bad Gateway")
	}
	return b.login, nil
}

// TestOwnBotLearnedLazily: without GITHUB_APP_SLUG, the App's bot login is
// asked for only when a sender of type Bot arrives (BotAccount caches it
// in serve; this fake answers every call). While it cannot be
// learned, such a delivery is answered 503 (GitHub records it as failed,
// to be redelivered) rather than enqueued; once learned, the App's own
// events are ignored and other bots' are acted on, and a person's event
// never waits on the lookup.
func TestOwnBotLearnedLazily(t *testing.T) {
	t.Parallel()
	bot := &flakyBot{fails: 1, login: "gitlease[bot]"}
	opts := defaultOptions()
	opts.mapper.BotLogin = ""
	opts.mapper.Bot = bot
	opts.mapper.AllowedAuthors, _ = webhook.ParseAllowedAuthors("any") // a bot's association is NONE
	env := newEnv(t, opts)
	own := payload(t, "pull_request-opened-bot")
	steps := []struct {
		name      string
		delivery  string
		body      []byte
		status    int
		outcome   webhook.Outcome
		wantCalls int
	}{
		{"a person's event asks nothing", "d-person", payload(t, "issues-opened"), http.StatusAccepted, webhook.OutcomeEnqueued, 0},
		{"own event while GitHub is down", "d-own", own, http.StatusServiceUnavailable, "", 1},
		{"own event redelivered once GitHub answers", "d-own", own, http.StatusOK, webhook.OutcomeIgnored, 2},
		{"another bot's event", "d-other-bot", edit(t, "pull_request-opened-bot", func(m map[string]any) {
			obj(m, "sender")["login"] = "dependabot[bot]"
		}), http.StatusOK, webhook.OutcomeReservationCollision, 3}, // acted on: its branch is the issue item's
	}
	for _, st := range steps {
		status, resp := env.post(t, request{event: "pull_request", delivery: st.delivery, body: st.body})
		if st.delivery == "d-person" {
			status, resp = env.post(t, request{event: "issues", delivery: st.delivery, body: st.body})
		}
		if status != st.status || resp.Outcome != st.outcome {
			t.Errorf("%s: %d %q (%s), want %d %q", st.name, status, resp.Outcome, resp.Error, st.status, st.outcome)
		}
		bot.mu.Lock()
		calls := bot.calls
		bot.mu.Unlock()
		if calls != st.wantCalls {
			t.Errorf("%s: the bot login was asked %d times in all, want %d", st.name, calls, st.wantCalls)
		}
	}
}
