package worker

import (
	"encoding/json"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/gitlease/gitlease/queue"
	"github.com/gitlease/gitlease/webhook"
)

// What a worker command gets from the server it runs under: an environment
// built from an allow-list (never the server's own secrets) and, when
// configured, another OS user's identity. Its room (HOME, TMPDIR, the
// dispatch file) is the sandbox's.

// maxDispatchEnv is the size from which the dispatch is passed only in
// GITLEASE_DISPATCH_FILE: the kernel refuses a single variable over 128 KiB
// (MAX_ARG_STRLEN), and a large one crowds the command's argument space.
const maxDispatchEnv = 64 << 10

// childEnv is a command's environment: the variables of base on the
// allow-list (PATH, LANG, LC_ALL, LC_CTYPE, TZ) or named in pass (the
// first of each), then the item's variables. Nothing else of base reaches
// the command, whatever its name: the item's GITLEASE_* variables,
// TRACEPARENT and GITHUB_TOKEN are added by the worker itself, HOME, TMPDIR and
// GITLEASE_DISPATCH_FILE by the sandbox (the command's own room).
func childEnv(base, pass []string, item []string) []string {
	want := map[string]bool{"PATH": true, "LANG": true, "LC_ALL": true, "LC_CTYPE": true, "TZ": true}
	for _, n := range pass {
		want[n] = true
	}
	seen := map[string]bool{}
	env := make([]string, 0, len(want)+len(item))
	for _, kv := range base {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !want[k] || seen[k] {
			continue
		}
		seen[k] = true
		env = append(env, kv)
	}
	return append(env, item...)
}

// commandUser is the OS user commands run as (WorkerConfig.User).
type commandUser struct {
	name string
	cred *syscall.Credential
}

// lookupCommandUser resolves name (a user name or numeric uid) to its uid,
// primary gid and supplementary groups. It returns an error
// when the user does not exist.
func lookupCommandUser(name string) (*commandUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("worker user %q: %w", name, err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("worker user %q has a non-numeric uid or gid", name)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups of worker user %q: %w", name, err)
	}
	for _, g := range ids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	return &commandUser{name: u.Username, cred: cred}, nil
}

// itemEnv lists the GITLEASE_* variables describing a leased item: the
// dispatch is in the file GITLEASE_DISPATCH_FILE names (the sandbox sets
// it) and, when under 64 KiB, in GITLEASE_DISPATCH too.
func itemEnv(f queue.Fence, dispatch json.RawMessage, meta webhook.ItemMeta, prov *queue.Provisioning) []string {
	v := map[string]string{
		"GITLEASE_ENTRY_ID":    f.QueueLease.EntryID,
		"GITLEASE_WORKFLOW_ID": f.WorkflowID,
	}
	if len(dispatch) < maxDispatchEnv {
		v["GITLEASE_DISPATCH"] = string(dispatch)
	}
	if s := f.Subject; s != nil {
		v["GITLEASE_QUALIFIED_ID"] = s.QualifiedID
		v["GITLEASE_GENERATION"] = strconv.FormatUint(s.Generation, 10)
	}
	v["GITLEASE_REPOSITORY"] = meta.Repository
	if r := f.Repository; r != nil {
		v["GITLEASE_REPOSITORY"] = r.Repository
		v["GITLEASE_BASE_REF"] = r.BaseRef
		v["GITLEASE_HEAD_REF"] = r.HeadRef
	}
	if meta.InstallationID > 0 {
		v["GITLEASE_INSTALLATION_ID"] = strconv.FormatInt(meta.InstallationID, 10)
	}
	if meta.Kind == webhook.KindPullRequest && meta.Number > 0 {
		// The subject is the pull request itself.
		v["GITLEASE_HEAD_SHA"] = meta.HeadSHA
		v["GITLEASE_PR_NUMBER"] = strconv.Itoa(meta.Number)
		v["GITLEASE_PR_URL"] = meta.HTMLURL
	}
	if prov != nil {
		if prov.HeadSHA != "" {
			v["GITLEASE_HEAD_SHA"] = prov.HeadSHA
		}
		if prov.PullRequestNumber > 0 {
			v["GITLEASE_PR_NUMBER"] = strconv.Itoa(prov.PullRequestNumber)
			v["GITLEASE_PR_URL"] = prov.PullRequestURL
		}
	}
	names := []string{
		"GITLEASE_ENTRY_ID", "GITLEASE_QUALIFIED_ID", "GITLEASE_GENERATION", "GITLEASE_WORKFLOW_ID",
		"GITLEASE_REPOSITORY", "GITLEASE_BASE_REF", "GITLEASE_HEAD_REF", "GITLEASE_HEAD_SHA",
		"GITLEASE_PR_NUMBER", "GITLEASE_PR_URL", "GITLEASE_INSTALLATION_ID",
	}
	env := make([]string, 0, len(names)+1)
	for _, n := range names {
		env = append(env, n+"="+v[n]) // always set, empty when unknown
	}
	if d, ok := v["GITLEASE_DISPATCH"]; ok {
		env = append(env, "GITLEASE_DISPATCH="+d)
	}
	return env
}
