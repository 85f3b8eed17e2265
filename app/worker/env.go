package worker

import (
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"
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
