package github

import (
	"context"
	"sync"
	"time"
)

// defaultBotRetryAfter is how long BotAccount answers the last failure
// without asking GitHub again: a burst of bot events during an outage
// costs one GET /app per interval, not one each.
const defaultBotRetryAfter = 5 * time.Second

// BotAccount learns the App's bot login ("<slug>[bot]") lazily: it asks GET
// /app the first time it is needed and again after a failure, so a GitHub
// blip at start does not leave the App's own events unrecognised until a
// restart. Once learned the login never changes. It implements
// webhook.BotIdentity and is safe for concurrent use.
type BotAccount struct {
	in         *Installations
	retryAfter time.Duration

	mu      sync.Mutex
	login   string
	lastErr error
	lastTry time.Time
}

// NewBotAccount returns the lazy bot login of the App behind in, asking
// GitHub again at most every retryAfter after a failure
// (defaultBotRetryAfter when not positive).
func NewBotAccount(in *Installations, retryAfter time.Duration) *BotAccount {
	if retryAfter <= 0 {
		retryAfter = defaultBotRetryAfter
	}
	return &BotAccount{in: in, retryAfter: retryAfter}
}

// BotLogin returns the App's bot login, asking GitHub if it is not known
// yet. It returns GitHub's error (at most once per few seconds a new one;
// in between, the last) while the slug cannot be read.
func (b *BotAccount) BotLogin(ctx context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.login != "" {
		return b.login, nil
	}
	if b.lastErr != nil && time.Since(b.lastTry) < b.retryAfter {
		return "", b.lastErr
	}
	b.lastTry = time.Now()
	login, err := b.in.BotLogin(ctx)
	if err != nil {
		b.lastErr = err
		return "", err
	}
	b.login, b.lastErr = login, nil
	return login, nil
}
