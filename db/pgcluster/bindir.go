package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries is returned by FindBinDir (and so by New and StartTemp) when
// no directory holding the PostgreSQL server programs initdb and pg_ctl was
// found. Callers add how to get them (install PostgreSQL, set
// GITLEASE_PG_BINDIR, use DATABASE_URL).
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (looked at pg_config --bindir, /usr/lib/postgresql/*/bin and PATH for initdb and pg_ctl)")

// debianBinDirs is where Debian and Ubuntu put each major version's server
// programs, which they do not put on PATH.
const debianBinDirs = "/usr/lib/postgresql/*/bin"

// FindBinDir returns the directory holding initdb and pg_ctl. A non-empty
// override (GITLEASE_PG_BINDIR, read by the caller) is used as it is and
// must hold both; otherwise it tries, in order, the directory `pg_config
// --bindir` names, the newest /usr/lib/postgresql/<major>/bin (by integer
// major version), and the directory of initdb on PATH (symlinks resolved).
// It returns an error naming override when that lacks the programs, and
// ErrNoBinaries when the search finds nothing.
func FindBinDir(ctx context.Context, override string) (string, error) {
	if override != "" {
		if !hasServer(override) {
			return "", fmt.Errorf("PostgreSQL binaries directory %s: no initdb and pg_ctl there", override)
		}
		return override, nil
	}
	if out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" && hasServer(d) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob(debianBinDirs)
	for _, d := range newestFirst(dirs) {
		if hasServer(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err := filepath.EvalSymlinks(p); err == nil && hasServer(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	return "", ErrNoBinaries
}

// hasServer reports whether d holds executable initdb and pg_ctl files.
func hasServer(d string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(d, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// newestFirst sorts /usr/lib/postgresql/<major>/bin paths by major version,
// highest first; paths without a number sort last.
func newestFirst(dirs []string) []string {
	sorted := append([]string(nil), dirs...)
	sort.SliceStable(sorted, func(i, j int) bool { return major(sorted[i]) > major(sorted[j]) })
	return sorted
}

// major is the major version in a /usr/lib/postgresql/<version>/bin path:
// 15 for 15, 9 for 9.6 (before PostgreSQL 10 the major had two parts, but
// any 10 or later is newer than all of them); -1 when it is not a number.
func major(bindir string) int {
	v, _, _ := strings.Cut(filepath.Base(filepath.Dir(bindir)), ".")
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}
