package webhook

import (
	"context"
	"fmt"
	"strings"
)

// BotIdentity tells the login of the App's own bot account,
// "<slug>[bot]". It may have to ask GitHub (GET /app) and fail; an
// implementation caches the answer once it has one and is safe for
// concurrent use.
type BotIdentity interface {
	BotLogin(ctx context.Context) (string, error)
}

// sentByItself reports whether the event was sent by this App's own bot,
// whose events are ignored (the App opening its own pull request must not
// enqueue work or collide with itself). MapperConfig.BotLogin, when set,
// is matched against every sender. MapperConfig.Bot is asked only for a
// sender of type Bot, the only kind an App's account is, so an ordinary
// delivery never waits on GitHub for it; when it cannot tell (GitHub
// unreachable at the first such event) the result is a *LookupError, which
// answers 503: GitHub records the failure and the delivery is redelivered,
// rather than an own event being enqueued or another bot's lost.
func (m *Mapper) sentByItself(ctx context.Context, facts Facts, senderType string) (bool, string, error) {
	if facts.Sender == nil || *facts.Sender == "" {
		return false, "", nil
	}
	sender := *facts.Sender
	if m.cfg.BotLogin != "" && strings.EqualFold(sender, m.cfg.BotLogin) {
		return true, m.cfg.BotLogin, nil
	}
	if m.cfg.Bot == nil || senderType != "Bot" {
		return false, "", nil
	}
	login, err := m.cfg.Bot.BotLogin(ctx)
	if err != nil {
		return false, "", &LookupError{Err: fmt.Errorf("tell whether bot %s is this App: %w", sender, err)}
	}
	return strings.EqualFold(sender, login), login, nil
}
