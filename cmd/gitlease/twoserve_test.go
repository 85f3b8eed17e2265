package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/webhook"
)

var servingAddr = regexp.MustCompile(`"msg":"serving","addr":"[^"]*:(\d+)"`)

// serveURL waits for a serve process to log the address it listens on.
func serveURL(t *testing.T, out *lockedBuffer) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := servingAddr.FindStringSubmatch(out.String()); m != nil {
			return "http://127.0.0.1:" + m[1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("serve did not start:\n%s", out.String())
	return ""
}

// TestTwoServeProcessesShareOneDatabase: two `gitlease serve` processes on
// one database, each with its built-in worker and outbox sender, take 100
// issue events between them: 100 branches, 100 pull requests, 100 check
// runs concluded success, none doubled.
//
// It runs against github.com and GitHub Enterprise Server.
func TestTwoServeProcessesShareOneDatabase(t *testing.T) {
	t.Parallel()
	forEachGitHub(t, testTwoServeProcesses, githubtest.ForbidRefUpdates())
}

func testTwoServeProcesses(t *testing.T, gh *githubtest.Server) {
	const issues = 100
	gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	gh.AddInstallation(2311213, "octocat/Hello-World")
	gh.ReserveNumbers("octocat/Hello-World", 5000)
	dbURL := dbtest.URL(t)
	bin := buildGitlease(t)
	env := append(append(devTestEnv(), githubEnv(gh)...), "DATABASE_URL="+dbURL, "PORT=0", "GITHUB_WEBHOOK_SECRET=whsec-0123456789abcdef",
		"GITLEASE_WORKER_SLOTS=5", "GITLEASE_WORKER_EXEC=true",
		"GITLEASE_GITHUB_WRITES_PER_SEC=0",   // 500 writes paced at 1/s would take 8 minutes
		"GITLEASE_GITHUB_CONTENT_PER_HOUR=0") // and 400 content-creating ones at 80 a minute, 5
	var urls []string
	for i := 0; i < 2; i++ {
		stop, out := startBinary(t, bin, env, "serve")
		t.Cleanup(func() { _ = stop() })
		urls = append(urls, serveURL(t, out))
	}

	raw, err := os.ReadFile("../../testdata/payloads/issues-opened.json")
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= issues; n++ {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		m["issue"].(map[string]any)["number"] = n
		body, _ := json.Marshal(m)
		req, _ := http.NewRequest(http.MethodPost, urls[n%2]+"/webhook", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "issues")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("two-serve-%d", n))
		req.Header.Set("X-Hub-Signature-256", webhook.Sign([]byte("whsec-0123456789abcdef"), body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("delivery %d answered %d", n, resp.StatusCode)
		}
	}

	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	done := gh.Wait(3*time.Minute, func() bool {
		var finished, pending int
		_ = pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM work_items WHERE status = 'completed'),
			(SELECT count(*) FROM outbox WHERE status <> 'done')`).Scan(&finished, &pending)
		return finished == issues && pending == 0
	})
	if !done {
		t.Fatal("the two servers did not complete every item and drain the outbox within 3 minutes")
	}
	branches, prs, runs := gh.Branches("octocat/Hello-World"), gh.PullRequests("octocat/Hello-World"), gh.CheckRuns("octocat/Hello-World")
	if len(branches) != issues+1 || len(prs) != issues || len(runs) != issues {
		t.Fatalf("%d branches, %d pull requests, %d check runs; want %d+main, %d, %d", len(branches), len(prs), len(runs), issues, issues, issues)
	}
	perEntry := map[string]int{}
	for _, r := range runs {
		perEntry[r.ExternalID]++
		if r.Conclusion != "success" {
			t.Errorf("check run %d concluded %q", r.ID, r.Conclusion)
		}
	}
	if len(perEntry) != issues {
		t.Fatalf("check runs name %d distinct entries, want %d", len(perEntry), issues)
	}
	for _, pr := range prs {
		if !pr.Draft || !strings.Contains(pr.Body, "<!-- gitlease ") {
			t.Errorf("pull request #%d: draft %v, body %q", pr.Number, pr.Draft, pr.Body)
		}
	}
}
