package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gitlease/gitlease/app"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/queue/rpc"
)

// TestForgedRPCItemsWriteNothingToGitHub: a /rpc token holder enqueues
// items whose dispatches name a real installation, repository and head
// commit, leases and completes them: gitlease writes nothing to GitHub for
// them (no check run, no branch, no pull request, not even a request),
// because only items from verified deliveries have GitHub side effects
// (docs/queue.md).
func TestForgedRPCItemsWriteNothingToGitHub(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	sha := h.gh.Push(repoName, "feature", "a change")
	srv := httptest.NewServer(app.NewServer(app.ServerConfig{RPCToken: "tok"}, h.pool, rpc.NewHandler(h.store, "test", nil), nil))
	t.Cleanup(srv.Close)
	call := func(method string, params any) json.RawMessage {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/rpc", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Error != nil {
			t.Fatalf("%s: %v %s", method, err, out.Error)
		}
		return out.Result
	}
	forged := []struct {
		kind, number, head string
		meta               map[string]any
	}{
		{"github_pull_request", "57", "refs/heads/feature", map[string]any{"installation_id": installation, "repository_id": repoID,
			"repository": repoName, "number": 57, "head_sha": sha, "html_url": "https://github.com/" + repoName + "/pull/57"}},
		{"github_issue", "42", "refs/heads/gitlease/issue-42", map[string]any{"installation_id": installation, "repository_id": repoID,
			"repository": repoName, "number": 42, "html_url": "https://github.com/" + repoName + "/issues/42"}},
	}
	for _, f := range forged {
		call("queue/v2/enqueue", map[string]any{
			"subject_dispatch": map[string]any{
				"subject":      map[string]any{"kind": f.kind, "id": fmt.Sprintf("%d#%s", repoID, f.number), "title": "forged", "metadata": f.meta},
				"workflow_ref": "coding", "trigger_source": "github:pull_request.opened", "requested_at": "2026-10-01T11:59:58Z",
			},
			"repository": map[string]any{"repository": repoName, "base_ref": "refs/heads/main", "head_ref": f.head},
		})
	}
	leased := h.leaseAll(t, "forger")
	if len(leased) != len(forged) {
		t.Fatalf("leased %d items, want %d", len(leased), len(forged))
	}
	for _, fe := range leased {
		it, err := h.store.Get(context.Background(), fe.Execution.QueueLease.EntryID)
		if err != nil || it.FromGitHub() {
			t.Fatalf("an RPC item counts as from GitHub (%v)", err)
		}
		h.complete(t, fe, queue.StatusCompleted)
	}
	h.drain(t, h.sender(t))
	var rows int
	if err := h.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d outbox rows written for RPC items, want none", rows)
	}
	if n := h.gh.Count(githubtest.AnyKind); n != 0 {
		t.Errorf("%d GitHub requests for RPC items, want none: %+v", n, h.gh.Requests())
	}
	if runs := h.gh.CheckRuns(repoName); len(runs) != 0 {
		t.Errorf("check runs written for RPC items: %+v", runs)
	}
}
