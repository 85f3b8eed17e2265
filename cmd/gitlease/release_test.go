package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// runScript runs scripts/NAME from the repository root with extra
// environment and returns its exit status and stderr.
func runScript(t *testing.T, env []string, name string, args ...string) (int, string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "scripts", name), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err = cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("run scripts/%s: %v", name, err)
		}
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// fileState is what must not change about a released file.
type fileState struct {
	sum     string
	modTime time.Time
	mode    os.FileMode
}

// snapshot describes every entry of dir, recursively.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{modTime: info.ModTime(), mode: info.Mode()}
		if !d.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			st.sum = hex.EncodeToString(h[:])
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReleaseScript: scripts/release builds the version-stamped binaries
// and a SHA256SUMS that matches them, refuses to build the same version
// again and leaves it untouched, and scripts/verify-release accepts the set
// and rejects it once a byte changes, a file is missing or one is added. It
// builds two targets (the host's and one more), not the default four.
func TestReleaseScript(t *testing.T) {
	t.Parallel()
	const version = "0.0.0-releasetest.1"
	dist := t.TempDir()
	host := runtime.GOOS + "/" + runtime.GOARCH
	other := "linux/amd64"
	if host == other {
		other = "darwin/arm64"
	}
	targets := []string{host, other}
	env := []string{"DIST_DIR=" + dist, "RELEASE_TARGETS=" + strings.Join(targets, " ")}

	if status, out := runScript(t, env, "release", version); status != 0 {
		t.Fatalf("scripts/release %s exited %d:\n%s", version, status, out)
	}
	dir := filepath.Join(dist, version)
	var want []string
	for _, target := range targets {
		want = append(want, "gitlease_"+version+"_"+strings.ReplaceAll(target, "/", "_"))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	wantAll := append(slices.Clone(want), "SHA256SUMS")
	slices.Sort(wantAll)
	if !slices.Equal(got, wantAll) {
		t.Fatalf("dist/%s holds %v, want %v", version, got, wantAll)
	}
	if top, _ := os.ReadDir(dist); len(top) != 1 {
		t.Errorf("DIST_DIR holds %d entries after a release, want only %s (a staging leftover?)", len(top), version)
	}

	// SHA256SUMS, checked independently of sha256sum.
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var wantSums strings.Builder
	for _, name := range want {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&wantSums, "%x  %s\n", sha256.Sum256(b), name)
	}
	if string(sums) != wantSums.String() {
		t.Errorf("SHA256SUMS =\n%s\nwant\n%s", sums, wantSums.String())
	}

	// The host binary carries the version.
	out, err := exec.Command(filepath.Join(dir, want[0]), "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != version {
		t.Errorf("%s version = %q, %v; want %s", want[0], out, err, version)
	}

	// Write-once: a second run refuses and changes nothing.
	before := snapshot(t, dist)
	status, msg := runScript(t, env, "release", version)
	if status == 0 || !strings.Contains(msg, "already exists") {
		t.Errorf("second scripts/release %s exited %d, want a refusal saying it already exists:\n%s", version, status, msg)
	}
	if after := snapshot(t, dist); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the refused release changed DIST_DIR:\nbefore %v\nafter  %v", before, after)
	}

	if status, msg := runScript(t, nil, "verify-release", dir); status != 0 {
		t.Fatalf("verify-release of a fresh release exited %d:\n%s", status, msg)
	}

	// One byte changed.
	bin := filepath.Join(dir, want[1])
	orig, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	altered := slices.Clone(orig)
	altered[len(altered)/2] ^= 1
	if err := os.WriteFile(bin, altered, 0o755); err != nil {
		t.Fatal(err)
	}
	status, msg = runScript(t, nil, "verify-release", dir)
	if status == 0 || !strings.Contains(msg, "altered: "+want[1]) {
		t.Errorf("verify-release after altering one byte exited %d, want a failure naming %s:\n%s", status, want[1], msg)
	}

	// A file missing.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	status, msg = runScript(t, nil, "verify-release", dir)
	if status == 0 || !strings.Contains(msg, "missing: "+want[1]) {
		t.Errorf("verify-release with a file missing exited %d, want a failure naming %s:\n%s", status, want[1], msg)
	}

	// The original back, plus a file SHA256SUMS does not list.
	if err := os.WriteFile(bin, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	if status, msg := runScript(t, nil, "verify-release", dir); status != 0 {
		t.Fatalf("verify-release after restoring the file exited %d:\n%s", status, msg)
	}
	if err := os.WriteFile(filepath.Join(dir, "gitlease_extra"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	status, msg = runScript(t, nil, "verify-release", dir)
	if status == 0 || !strings.Contains(msg, "extra: gitlease_extra") {
		t.Errorf("verify-release with an extra file exited %d, want a failure naming it:\n%s", status, msg)
	}
}
