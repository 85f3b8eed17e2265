package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gitlease/gitlease/webhook"
)

// deliverTimeout bounds one delivery, as GitHub's own 10 s, with room for a
// slow local database.
const deliverTimeout = 30 * time.Second

// maxDeliverAnswer bounds how much of the answer is read and printed.
const maxDeliverAnswer = 1 << 20

// runDeliver is `gitlease deliver`: it signs a payload file like GitHub
// does and POSTs it to a webhook URL, then prints the status and the answer.
// It returns an error (a non-zero exit) when the answer is not 2xx.
func runDeliver(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gitlease deliver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: gitlease deliver --event EVENT [flags] FILE

Signs FILE with the webhook secret, the first of GITHUB_WEBHOOK_SECRET (or
of the file GITHUB_WEBHOOK_SECRET_FILE names; never a flag), and POSTs it like GitHub delivers a
webhook (X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256), then prints
the HTTP status and the answer. Exits non-zero unless the answer is 2xx.

`)
		fs.PrintDefaults()
	}
	event := fs.String("event", "", "X-GitHub-Event: issues, pull_request, issue_comment, ping, ... (required)")
	delivery := fs.String("delivery", "", "X-GitHub-Delivery; a new random UUID when empty (reuse one to test a redelivery)")
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	target := fs.String("url", "http://127.0.0.1:"+port+"/webhook", "webhook URL")
	contentType := fs.String("content-type", "json", "json (application/json) or form (application/x-www-form-urlencoded, payload=<json>)")

	// Flags may come before or after FILE.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return errHelp
			}
			return &configError{Setting: "flags", Problem: err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case *event == "":
		return &configError{Setting: "--event", Problem: "required (issues, pull_request, issue_comment, ping, ...)"}
	case len(files) != 1:
		return &configError{Setting: "FILE", Problem: "exactly one payload file is required"}
	}
	secret, err := signingSecret()
	if err != nil {
		return err
	}
	if u, err := url.Parse(*target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &configError{Setting: "--url", Problem: fmt.Sprintf("%q is not an http(s) URL", *target)}
	}
	if *delivery == "" {
		*delivery = uuid.NewString()
	}

	payload, err := os.ReadFile(files[0])
	if err != nil {
		return fmt.Errorf("read payload: %w", err)
	}
	body, mime := payload, webhook.ContentTypeJSON
	switch *contentType {
	case "json":
	case "form":
		body, mime = []byte(url.Values{"payload": {string(payload)}}.Encode()), webhook.ContentTypeForm
	default:
		return &configError{Setting: "--content-type", Problem: fmt.Sprintf("%q is neither json nor form", *contentType)}
	}

	ctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, *target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build delivery request: %w", err)
	}
	req.Header.Set("Content-Type", mime)
	req.Header.Set("User-Agent", "GitHub-Hookshot/gitlease")
	req.Header.Set(webhook.EventHeader, *event)
	req.Header.Set(webhook.DeliveryHeader, *delivery)
	req.Header.Set(webhook.SignatureHeader, webhook.Sign([]byte(secret), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("deliver %s to %s: %w", *event, *target, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxDeliverAnswer))
	if err != nil {
		return fmt.Errorf("read the answer to delivery %s: %w", *delivery, err)
	}
	fmt.Fprintf(stdout, "HTTP %s\n", resp.Status)
	if len(answer) > 0 {
		stdout.Write(answer)
		if answer[len(answer)-1] != '\n' {
			fmt.Fprintln(stdout)
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("delivery %s answered %s", *delivery, resp.Status)
	}
	return nil
}

// signingSecret is the secret deliver signs with: the first of
// GITHUB_WEBHOOK_SECRET's (or its _FILE's) comma-separated secrets, which
// must be at least minSecretLen characters, as serve requires.
func signingSecret() (string, error) {
	const env = "GITHUB_WEBHOOK_SECRET"
	v, from, err := readSecret(env, os.Getenv(env), env+"_FILE", strings.TrimSpace(os.Getenv(env+"_FILE")))
	if err != nil {
		return "", err
	}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			return s, checkSecretLength(from, s, 0)
		}
	}
	return "", &configError{Setting: env, Problem: "required to sign the delivery"}
}
