package worker

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
	"github.com/gitlease/gitlease/app/outbox"
	"github.com/gitlease/gitlease/db/dbtest"
	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// probeAncestors is a command that walks its ancestors through
// /proc/<pid>/status and tries to read each one's environ, printing
// "read <pid>" for every one it could read and "closed <pid>" otherwise.
const probeAncestors = `pid=$$
while :; do
	pid=$(awk '/^PPid:/ {print $2}' /proc/$pid/status)
	[ -z "$pid" ] || [ "$pid" -le 1 ] && break
	if cat /proc/$pid/environ >/dev/null 2>&1; then echo "read $pid"; else echo "closed $pid"; fi
done
echo "uid $(id -u)"`

// TestWorkerUserCannotReadTheServer: with User set, the command runs as
// that user and reads no ancestor's environment (the test process, root,
// stands for serve); without it, as root, it reads them all. The test runs
// as root, as serve does in a container without GITLEASE_WORKER_USER.
func TestWorkerUserCannotReadTheServer(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test switches users: run it as root (make test in the dev container does)")
	}
	cases := []struct {
		user     string
		wantRead bool
	}{
		{"", true}, // the finding: same user, nothing in the way
		{"nobody", false},
	}
	for _, tc := range cases {
		t.Run("user="+tc.user, func(t *testing.T) {
			t.Parallel()
			store, pool := newQueue(t, time.Minute)
			it := issueItem(t, store, 1, false)
			startWorker(t, store, pool, WorkerConfig{User: tc.user, Exec: probeAncestors})
			done := waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
			note := done.Note()
			self := "read " + strconv.Itoa(os.Getpid())
			if got := strings.Contains(note, self); got != tc.wantRead {
				t.Errorf("the command read the server's environ: %v, want %v; it reported:\n%s", got, tc.wantRead, note)
			}
			if !tc.wantRead && strings.Contains(note, "read ") {
				t.Errorf("the command read an ancestor's environ:\n%s", note)
			}
			if tc.user == "nobody" && !strings.Contains(note, "uid 65534") {
				t.Errorf("the command did not run as nobody:\n%s", note)
			}
		})
	}
}

// TestWorkerEndsTheProcessGroup: a background child the command leaves
// behind is killed when the command ends, so it keeps neither the token
// nor the slot.
func TestWorkerEndsTheProcessGroup(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	it := issueItem(t, store, 1, false)
	startWorker(t, store, pool, WorkerConfig{Exec: `sleep 300 </dev/null >/dev/null 2>&1 & echo "child $!"`})
	done := waitStatus(t, store, it.EntryID, queue.StatusCompleted, 15*time.Second)
	var pid int
	if _, err := fmt.Sscanf(strings.TrimSpace(done.Note()), "child %d", &pid); err != nil || pid <= 0 {
		t.Fatalf("no child pid in %q", done.Note())
	}
	eventually(t, 10*time.Second, "the background child ended", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie waiting for its new parent to reap it.
		return err != nil || strings.Contains(string(b), ") Z ")
	})
	_ = syscall.Kill(pid, syscall.SIGKILL) // in case the test fails above
}

// TestWorkerLargeDispatchOnlyInAFile: a dispatch of 64 KiB or more is not
// put in GITLEASE_DISPATCH (the kernel refuses a variable over 128 KiB);
// the file, owned by the command's user with mode 0600, holds it.
func TestWorkerLargeDispatchOnlyInAFile(t *testing.T) {
	t.Parallel()
	store, pool := newQueue(t, time.Minute)
	res, err := store.Enqueue(context.Background(), queue.EnqueueParams{Dispatch: queue.SubjectDispatch{
		Subject:     &queue.SubjectRef{Kind: webhook.KindIssue, ID: "1296269#9", Title: "big", Description: strings.Repeat("x", 200<<10)},
		WorkflowRef: "coding", TriggerSource: "test", RequestedAt: queue.Timestamp{Time: time.Now().UTC().Truncate(time.Second)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, store, pool, WorkerConfig{User: "nobody",
		Exec: `echo "env ${#GITLEASE_DISPATCH} file $(wc -c < "$GITLEASE_DISPATCH_FILE") $(stat -c '%a %U' "$GITLEASE_DISPATCH_FILE")"`})
	done := waitStatus(t, store, res.EntryID, queue.StatusCompleted, 15*time.Second)
	var envLen, fileLen int
	var mode, owner string
	if _, err := fmt.Sscanf(done.Note(), "env %d file %d %s %s", &envLen, &fileLen, &mode, &owner); err != nil {
		t.Fatalf("command said %q: %v", done.Note(), err)
	}
	if envLen != 0 || fileLen < 200<<10 || mode != "600" || owner != "nobody" {
		t.Errorf("GITLEASE_DISPATCH %d bytes, file %d bytes, mode %s, owner %s; want none, the dispatch, 600, nobody", envLen, fileLen, mode, owner)
	}
}

// TestWorkerTokenIsScopedAndRevoked: the command of an item from a
// verified delivery gets a token for its repository alone with the four
// permissions it needs, revoked when the command ends, that GitHub refuses
// on another repository; an item with the same metadata enqueued over /rpc
// gets no token at all and does not wait for a branch.
func TestWorkerTokenIsScopedAndRevoked(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t, githubtest.Lenient())
	gh.AddRepo("octo", "widgets", 1296269, "main", true)
	gh.AddRepo("octo", "secrets", 1296270, "main", true)
	gh.AddInstallation(4242, "octo/widgets", "octo/secrets")
	pool := dbtest.New(t)
	store := queue.NewStore(pool, queue.Config{LeaseTTL: 10 * time.Second, Views: outbox.NewItems(pool)})
	inst, err := github.NewInstallations(github.Config{AppID: gh.AppID, PrivateKey: gh.PrivateKeyPEM, APIURL: gh.URL()})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(n int, fromGitHub bool) string {
		meta, _ := json.Marshal(map[string]any{"installation_id": 4242, "repository_id": 1296269, "repository": "octo/widgets", "number": n})
		res, err := store.Enqueue(context.Background(), queue.EnqueueParams{
			Dispatch: queue.SubjectDispatch{
				Subject:     &queue.SubjectRef{Kind: webhook.KindPullRequest, ID: fmt.Sprintf("1296269#%d", n), Metadata: meta},
				WorkflowRef: "coding", TriggerSource: "test", RequestedAt: queue.Timestamp{Time: time.Now().UTC().Truncate(time.Second)},
			},
			FromGitHub: fromGitHub,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.EntryID
	}
	verified, forged := enqueue(1, true), enqueue(2, false)
	// The command uses its token on its own repository and on another one.
	startWorkerWith(t, store, pool, inst, WorkerConfig{Slots: 2, Exec: `
[ -n "$GITHUB_TOKEN" ] || { echo "no token"; exit 0; }
for r in widgets secrets; do
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: token $GITHUB_TOKEN" "` + gh.URL() + `repos/octo/$r")
	echo "$r $code"
done
echo "token $GITHUB_TOKEN"
echo "sha $(printf %s "$GITHUB_TOKEN" | sha256sum | cut -c1-64)"`})
	v := waitStatus(t, store, verified, queue.StatusCompleted, 20*time.Second)
	f := waitStatus(t, store, forged, queue.StatusCompleted, 20*time.Second)
	if f.Note() != "no token" {
		t.Errorf("the RPC item's command said %q, want no token", f.Note())
	}
	if !strings.Contains(v.Note(), "widgets 200") || !strings.Contains(v.Note(), "secrets 404") {
		t.Errorf("with its token the command got %q, want its repository 200 and the other 404", v.Note())
	}
	if !strings.Contains(v.Note(), "token ***\n") {
		t.Errorf("the token is not masked in the note: %q", v.Note())
	}
	sum := v.Note()[strings.Index(v.Note(), "sha ")+len("sha "):]
	scopes := gh.TokenScopes()
	i := slices.IndexFunc(scopes, func(s githubtest.TokenScope) bool {
		return fmt.Sprintf("%x", sha256.Sum256([]byte(s.Token))) == strings.TrimSpace(sum)
	})
	if i < 0 {
		t.Fatalf("the command's token is not one the fake issued: sha %q", sum)
	}
	sc := scopes[i]
	wantPerms := map[string]string{"contents": "write", "pull_requests": "write", "checks": "write", "metadata": "read"}
	if !slices.Equal(sc.RepositoryIDs, []int64{1296269}) || fmt.Sprint(sc.Permissions) != fmt.Sprint(wantPerms) {
		t.Errorf("token scope: repositories %v, permissions %v; want [1296269], %v", sc.RepositoryIDs, sc.Permissions, wantPerms)
	}
	if !sc.Revoked {
		t.Error("the command's token was not revoked when it ended")
	}
	if len(scopes) != 1 {
		t.Errorf("%d tokens minted, want 1 (none for the RPC item)", len(scopes))
	}
}
