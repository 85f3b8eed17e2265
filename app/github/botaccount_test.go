package github_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
)

// TestBotAccountRetriesAfterAFailure: a failed GET /app at the first bot
// event does not stick: a later call asks again (after the short pause)
// and learns the login, which is then kept without asking GitHub again.
func TestBotAccountRetriesAfterAFailure(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	// A call is tried once and retried in place three times: fail them all.
	gh.FailNext(githubtest.KindGetApp, 4, http.StatusBadGateway)
	inst, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	bot := github.NewBotAccount(inst, 10*time.Millisecond)
	ctx := context.Background()
	if login, err := bot.BotLogin(ctx); err == nil {
		t.Fatalf("BotLogin with GitHub failing = %q, want an error", login)
	}
	var login string
	deadline := 30
	for ; deadline > 0; deadline-- {
		if login, err = bot.BotLogin(ctx); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if login != githubtest.DefaultSlug+"[bot]" {
		t.Fatalf("BotLogin = %q, %v; want %s[bot]", login, err, githubtest.DefaultSlug)
	}
	asked := gh.Count(githubtest.KindGetApp)
	for range 3 {
		if again, err := bot.BotLogin(ctx); err != nil || again != login {
			t.Fatalf("BotLogin once learned = %q, %v", again, err)
		}
	}
	if n := gh.Count(githubtest.KindGetApp); n != asked {
		t.Errorf("GET /app asked %d more times once the login was known", n-asked)
	}
}
