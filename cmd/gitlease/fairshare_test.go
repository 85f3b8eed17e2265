package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/webhook"
)

// TestCapHoldsOverThreeServeProcesses: three `gitlease serve` processes
// with GITLEASE_MAX_ASSIGNED_PER_INSTALLATION=4, each with 5 built-in
// worker slots whose command never ends, and three outside workers leasing
// over /rpc at the same time, take items of two installations: each
// installation ends with exactly 4 items assigned. Nothing completes, so
// the assigned count only grows: ending at 4 means it never passed 4.
func TestCapHoldsOverThreeServeProcesses(t *testing.T) {
	t.Parallel()
	const limit, perInstallation = 4, 15
	installations := []int64{2311213, 2311214}
	gh := githubtest.New(t)
	gh.AddRepo("octocat", "Hello-World", 1296269, "main", true)
	gh.AddRepo("hubot", "Hello-World", 1296270, "main", true)
	gh.AddInstallation(installations[0], "octocat/Hello-World")
	gh.AddInstallation(installations[1], "hubot/Hello-World")
	dbURL := dbtest.URL(t)
	bin := buildGitlease(t)
	env := append(devTestEnv(), "DATABASE_URL="+dbURL, "PORT=0", "GITHUB_WEBHOOK_SECRET=whsec-0123456789abcdef", "GITLEASE_RPC_TOKEN=rpc-token-0123456789abcdef",
		"GITHUB_APP_ID="+fmt.Sprint(gh.AppID), "GITHUB_PRIVATE_KEY="+string(gh.PrivateKeyPEM), "GITHUB_API_URL="+gh.URL(),
		"GITLEASE_WORKER_SLOTS=5", "GITLEASE_WORKER_EXEC=sleep 600", "GITLEASE_MAX_ASSIGNED_PER_INSTALLATION="+fmt.Sprint(limit),
		"GITLEASE_GITHUB_WRITES_PER_SEC=0")
	var urls []string
	for range 3 {
		stop, out := startBinary(t, bin, env, "serve")
		t.Cleanup(func() { _ = stop() })
		urls = append(urls, serveURL(t, out))
	}
	raw, err := os.ReadFile("../../testdata/payloads/issues-opened.json")
	if err != nil {
		t.Fatal(err)
	}
	// Outside workers lease over /rpc while the deliveries arrive.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"queue/v2/lease","params":{"max":5,"owner_id":"outside-%d","workflow_ids":["%d-%d-a","%d-%d-b","%d-%d-c","%d-%d-d","%d-%d-e"]}}`,
					w, w, i, w, i, w, i, w, i, w, i)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, urls[w]+"/rpc", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer rpc-token-0123456789abcdef")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"error"`)) {
					t.Errorf("outside lease answered %d %s", resp.StatusCode, b)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	for n := 1; n <= perInstallation; n++ {
		for k, inst := range installations {
			var m map[string]any
			_ = json.Unmarshal(raw, &m)
			m["issue"].(map[string]any)["number"] = n
			m["installation"].(map[string]any)["id"] = inst
			repo := m["repository"].(map[string]any)
			if k == 1 {
				repo["full_name"], repo["name"], repo["id"] = "hubot/Hello-World", "Hello-World", 1296270
				repo["owner"].(map[string]any)["login"] = "hubot"
			}
			body, _ := json.Marshal(m)
			req, _ := http.NewRequest(http.MethodPost, urls[n%3]+"/webhook", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "issues")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("cap-%d-%d", inst, n))
			req.Header.Set("X-Hub-Signature-256", webhook.Sign([]byte("whsec-0123456789abcdef"), body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("delivery %d of %d answered %d", n, inst, resp.StatusCode)
			}
		}
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	assigned := func() string {
		rows, err := pool.Query(context.Background(), `SELECT installation_id, count(*) FROM work_items WHERE status = 'assigned' GROUP BY 1 ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var inst, n int64
			_ = rows.Scan(&inst, &n)
			got = append(got, fmt.Sprintf("%d:%d", inst, n))
		}
		return strings.Join(got, " ")
	}
	want := fmt.Sprintf("%d:%d %d:%d", installations[0], limit, installations[1], limit)
	deadline := time.Now().Add(time.Minute)
	for assigned() != want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	// Keep leasing a while longer: the count must not move.
	time.Sleep(2 * time.Second)
	cancel()
	wg.Wait()
	if got := assigned(); got != want {
		t.Fatalf("assigned by installation %q, want %q", got, want)
	}
	var pending int
	_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM work_items WHERE status = 'pending'`).Scan(&pending)
	if pending != 2*(perInstallation-limit) {
		t.Fatalf("%d items pending, want %d", pending, 2*(perInstallation-limit))
	}
}
