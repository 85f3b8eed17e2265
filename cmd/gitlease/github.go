package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/gitlease/gitlease/app/github"
)

// githubFromConfig builds the App's client factory, or returns nil when no
// GitHub App credentials are configured: then GitHub writes wait in the
// outbox, visible and not lost, until they are.
func githubFromConfig(cfg config, transport http.RoundTripper, budgets github.BudgetRecorder, logger *slog.Logger) (*github.Installations, error) {
	key := []byte(strings.ReplaceAll(string(cfg.PrivateKey), `\n`, "\n")) // PEM pasted into one env line
	if cfg.PrivateKeyFile != "" {
		b, err := os.ReadFile(cfg.PrivateKeyFile)
		if err != nil {
			return nil, &configError{Setting: "GITHUB_PRIVATE_KEY_FILE", Problem: fmt.Sprintf("cannot read it: %v", err)}
		}
		key = b
	}
	switch {
	case cfg.AppID == 0 && len(key) == 0:
		logger.Warn("no GitHub App credentials (GITHUB_APP_ID, GITHUB_PRIVATE_KEY): intake and queue only; GitHub writes wait in the outbox")
		return nil, nil
	case cfg.AppID == 0:
		return nil, &configError{Setting: "GITHUB_APP_ID", Problem: "required with a private key"}
	case len(key) == 0:
		return nil, &configError{Setting: "GITHUB_PRIVATE_KEY", Problem: "required with GITHUB_APP_ID (or set GITHUB_PRIVATE_KEY_FILE)"}
	}
	gh, err := github.NewInstallations(github.Config{AppID: cfg.AppID, PrivateKey: key, APIURL: cfg.APIURL, Slug: cfg.AppSlug, Transport: transport,
		WritesPerSec: cfg.GitHubWritesPerSec, ContentPerHour: cfg.GitHubContentPerHour, Budgets: budgets})
	if err != nil {
		return nil, &configError{Setting: "GITHUB_PRIVATE_KEY", Problem: err.Error()}
	}
	return gh, nil
}
