package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/redeliver"
	"github.com/gitlease/gitlease/db/dbtest"
)

// TestServeRedeliversWhatItMissed: deliveries GitHub sent while serve was
// stopped are requested once each by serve's reconciler after it starts and
// enqueued once each; deliveries answered 401 (GitHub signing with a secret
// serve does not know) are counted and left alone until `gitlease redeliver
// --include-rejected`, which a dry run only lists.
//
// It runs against github.com and GitHub Enterprise Server.
func TestServeRedeliversWhatItMissed(t *testing.T) {
	t.Parallel()
	forEachGitHub(t, testServeRedeliversWhatItMissed)
}

func testServeRedeliversWhatItMissed(t *testing.T, gh *githubtest.Server) {
	gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	gh.AddInstallation(2311213, "octocat/Hello-World")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // serve is stopped: nothing listens there yet
	hookURL := fmt.Sprintf("http://127.0.0.1:%d/webhook", port)
	gh.SetWebhook(hookURL, "whsec-0123456789abcdef")
	raw, err := os.ReadFile("../../testdata/payloads/issues-opened.json")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(n int) []byte {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		m["issue"].(map[string]any)["number"] = n
		b, _ := json.Marshal(m)
		return b
	}
	const missed, rejected = 5, 3
	for n := 1; n <= missed; n++ {
		if a := gh.Deliver("issues", issue(n)); a.StatusCode != 0 {
			t.Fatalf("delivery to a stopped serve recorded %d %q", a.StatusCode, a.Status)
		}
	}

	dbURL := dbtest.URL(t)
	bin := buildGitlease(t)
	env := append(append(devTestEnv(), githubEnv(gh)...), "DATABASE_URL="+dbURL, fmt.Sprintf("PORT=%d", port), "GITHUB_WEBHOOK_SECRET=whsec-0123456789abcdef",
		"GITLEASE_WORKER_SLOTS=0", "GITLEASE_REDELIVER_INTERVAL=1s")
	_, out := startBinary(t, bin, env, "serve")
	base := serveURL(t, out)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	items := func() int {
		var n int
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM work_items`).Scan(&n)
		return n
	}
	if !gh.Wait(60*time.Second, func() bool { return items() == missed }) {
		t.Fatalf("%d items after serve started, want %d\n%s", items(), missed, out.String())
	}

	gh.SetWebhook(hookURL, "a secret serve does not know")
	for n := missed + 1; n <= missed+rejected; n++ {
		if a := gh.Deliver("issues", issue(n)); a.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong-secret delivery recorded %d", a.StatusCode)
		}
	}
	gh.SetWebhook(hookURL, "whsec-0123456789abcdef") // the secret is fixed
	metric := func(line string) bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), line)
	}
	if !gh.Wait(30*time.Second, func() bool { return metric(`gitlease_redeliveries_total{result="rejected_skipped"} 3`) }) {
		t.Fatalf("serve's scans did not count the 401s as rejected_skipped\n%s", out.String())
	}
	if !metric(`gitlease_redeliveries_total{result="requested"} 5`) {
		t.Fatal("serve's requested metric is not 5")
	}

	redeliver := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"redeliver"}, args...)...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gitlease redeliver %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	dry := redeliver("--since", "1h", "--dry-run", "--include-rejected")
	if strings.Count(dry, "would_request") != rejected || !strings.Contains(dry, "dry run") {
		t.Fatalf("dry run printed:\n%s", dry)
	}
	if items() != missed {
		t.Fatalf("a dry run enqueued: %d items", items())
	}
	did := redeliver("--include-rejected")
	if strings.Count(did, " requested ") != rejected {
		t.Fatalf("redeliver --include-rejected printed:\n%s", did)
	}
	if !gh.Wait(30*time.Second, func() bool { return items() == missed+rejected }) {
		t.Fatalf("%d items after --include-rejected, want %d", items(), missed+rejected)
	}
	// Every guid was requested exactly once, by serve or by the command.
	per := gh.RedeliveryRequests()
	if len(per) != missed+rejected {
		t.Fatalf("%d guids requested, want %d: %v", len(per), missed+rejected, per)
	}
	for g, n := range per {
		if n != 1 {
			t.Errorf("guid %s requested %d times", g, n)
		}
	}
	if got := strings.Count(out.String(), `"msg":"requested webhook redelivery"`); got != missed {
		t.Errorf("serve logged %d redelivery requests, want %d", got, missed)
	}
}

func TestRedeliverConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env, value, want string
	}{
		{"GITLEASE_DELIVERY_RETENTION", "24h", "GITLEASE_DELIVERY_RETENTION"},
		{"GITLEASE_REDELIVER_LOOKBACK", "73h", "GITLEASE_REDELIVER_LOOKBACK"},
		{"GITLEASE_REDELIVER_LOOKBACK", "0", "GITLEASE_REDELIVER_LOOKBACK"},
		{"GITLEASE_REDELIVER_INTERVAL", "-1s", "GITLEASE_REDELIVER_INTERVAL"},
		{"GITLEASE_REDELIVER_INTERVAL", "soon", "GITLEASE_REDELIVER_INTERVAL"},
	}
	for _, c := range cases {
		flagName := map[string]string{
			"GITLEASE_DELIVERY_RETENTION": "--delivery-retention", "GITLEASE_REDELIVER_LOOKBACK": "--redeliver-lookback",
			"GITLEASE_REDELIVER_INTERVAL": "--redeliver-interval",
		}[c.env]
		_, err := loadConfig("serve", []string{flagName, c.value}, true, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), c.want+":") {
			t.Errorf("%s=%s: error %v, want one naming %s", c.env, c.value, err, c.want)
		}
	}
	cfg, err := loadConfig("serve", []string{"--redeliver-interval", "0", "--delivery-retention", "72h"}, true, io.Discard)
	if err != nil || cfg.RedeliverInterval != 0 || cfg.RedeliverLookback != 72*time.Hour {
		t.Fatalf("interval 0: %+v, %v", cfg, err)
	}
	// GitHub Enterprise Server keeps its delivery log 7 days: the lookback
	// may reach that far, and delivery records must be kept as long.
	ghes := []string{"--github-api-url", "https://ghes.example.com/api/v3/"}
	if cfg, err := loadConfig("serve", append(ghes, "--redeliver-lookback", "168h"), true, io.Discard); err != nil || cfg.RedeliverLookback != 168*time.Hour {
		t.Errorf("GHES, lookback 168h: %+v, %v", cfg.RedeliverLookback, err)
	}
	for _, args := range [][]string{{"--redeliver-lookback", "169h"}, {"--delivery-retention", "100h"}} {
		if _, err := loadConfig("serve", append(ghes, args...), true, io.Discard); err == nil {
			t.Errorf("GHES, %v accepted", args)
		}
	}
	if _, err := loadConfig("serve", []string{"--redeliver-lookback", "168h"}, true, io.Discard); err == nil {
		t.Error("github.com, lookback 168h accepted")
	}
}

func TestPrintReport(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	rep := redeliver.Report{From: at.Add(-24 * time.Hour), Pages: 2, Attempts: 130, GUIDs: 120, Findings: []redeliver.Finding{
		{GUID: "g-1", Event: "issues", Action: "opened", StatusCode: 0, Status: "failed to connect", DeliveredAt: at, Attempts: 1, Requests: 1, Outcome: redeliver.ResultRequested},
		{GUID: "g-2", Event: "push", StatusCode: 503, Status: "Invalid HTTP Response: 503", DeliveredAt: at, Attempts: 2, Outcome: redeliver.OutcomeIrrelevant},
	}}
	var b strings.Builder
	printReport(&b, rep, false)
	out := b.String()
	for _, want := range []string{
		"GUID  EVENT   ACTION  LAST ATTEMPT",
		"g-1   issues  opened  2026-05-01T12:00:00Z  0 (failed to connect)",
		"g-2   push    -       2026-05-01T12:00:00Z  503",
		"scanned 130 attempts of 120 deliveries since 2026-04-30T12:00:00Z in 2 pages; 2 without a successful attempt: 1 requested, 0 recorded by gitlease, 0 rejected as bad input, 1 irrelevant\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
