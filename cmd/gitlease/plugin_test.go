package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gitlease/gitlease/db/dbtest"
)

func TestManifestFlag(t *testing.T) {
	t.Parallel()
	bin := buildGitlease(t)
	for _, flag := range []string{"--manifest", "-m"} {
		out, err := exec.Command(bin, flag).Output()
		if err != nil {
			t.Fatalf("gitlease %s: %v", flag, err)
		}
		if strings.Count(string(out), "\n") != 1 {
			t.Fatalf("gitlease %s printed %q, want one line", flag, out)
		}
		var got, want map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("manifest is not JSON: %v", err)
		}
		raw, err := os.ReadFile("../../testdata/protocol/examples/manifest.json")
		if err != nil {
			t.Fatal(err)
		}
		var example struct{ Stdout map[string]any }
		if err := json.Unmarshal(raw, &example); err != nil {
			t.Fatal(err)
		}
		want = example.Stdout
		want["version"] = got["version"] // implementation-chosen
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("manifest:\n got  %v\n want %v", got, want)
		}
	}
}

// TestPluginOverStdio runs `gitlease plugin` as a queue host would: one
// JSON-RPC message per line on stdin, responses on stdout, exit at `exit`.
func TestPluginOverStdio(t *testing.T) {
	t.Parallel()
	bin := buildGitlease(t)
	cmd := exec.Command(bin, "plugin")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbtest.URL(t))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	call := func(req string) map[string]any {
		t.Helper()
		if _, err := stdin.Write([]byte(req + "\n")); err != nil {
			t.Fatalf("write: %v", err)
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read response to %s: %v", req, err)
		}
		var resp map[string]any
		if err := json.Unmarshal(line, &resp); err != nil {
			t.Fatalf("response %q is not JSON: %v", line, err)
		}
		return resp
	}
	if resp := call(`{"jsonrpc":"2.0","id":1,"method":"queue/stats"}`); resp["error"].(map[string]any)["code"] != float64(-32000) {
		t.Fatalf("queue call before initialize: %v, want -32000", resp)
	}
	init := call(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocol_version":"1.2.0","host_info":{"name":"test","version":"0.7.0"},"capabilities":{},"init_extensions":{"project_binding":{"project_root":"/srv/x"}}}}`)
	extra := init["result"].(map[string]any)["kind_capabilities"].(map[string]any)["queue"].(map[string]any)["extra"].(map[string]any)
	if extra["max_lease_batch"] != float64(5) || extra["generation_fenced_leases_v1"] != true {
		t.Fatalf("initialize advertises %v", extra)
	}
	enq := call(`{"jsonrpc":"2.0","id":3,"method":"queue/v2/enqueue","params":{"subject_dispatch":{"subject":{"kind":"github_issue","id":"1#1"},"workflow_ref":"coding","trigger_source":"test","requested_at":"2026-10-01T12:00:00Z"}}}`)
	if enq["result"].(map[string]any)["enqueued"] != true {
		t.Fatalf("enqueue: %v", enq)
	}
	lease := call(`{"jsonrpc":"2.0","id":4,"method":"queue/v2/lease","params":{"max":5,"owner_id":"o","workflow_ids":["a","b","c","d","e"]}}`)
	leased := lease["result"].(map[string]any)["leased"].([]any)
	if len(leased) != 1 {
		t.Fatalf("lease: %v", lease)
	}
	fence, _ := json.Marshal(leased[0].(map[string]any)["execution"])
	done := call(`{"jsonrpc":"2.0","id":5,"method":"queue/v2/completion","params":{"execution":` + string(fence) + `,"status":"completed"}}`)
	if done["result"].(map[string]any)["outcome"] != "applied" {
		t.Fatalf("completion: %v", done)
	}
	if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","method":"exit"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("plugin exit: %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("plugin did not exit after exit")
	}
}
