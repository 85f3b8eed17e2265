package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// facts describe the machine and the server, so that figures can be pasted
// into docs with what they were measured on.
type facts struct {
	cpus     int
	memTotal string
	goVer    string
	pgVer    string
	settings [][2]string
}

// pgSettings are the server settings that move queue throughput most.
var pgSettings = []string{
	"synchronous_commit", "shared_buffers", "fsync", "wal_sync_method", "commit_delay",
	"max_wal_size", "checkpoint_timeout", "max_connections",
}

func readFacts(ctx context.Context, conn *pgx.Conn) (facts, error) {
	f := facts{cpus: runtime.NumCPU(), memTotal: memTotal(), goVer: runtime.Version()}
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&f.pgVer); err != nil {
		return f, fmt.Errorf("read server version: %w", err)
	}
	for _, name := range pgSettings {
		var v string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return f, fmt.Errorf("read setting %s: %w", name, err)
		}
		f.settings = append(f.settings, [2]string{name, v})
	}
	return f, nil
}

func (f facts) print(w io.Writer) {
	fmt.Fprintf(w, "machine:  %d CPUs (nproc), %s memory, %s/%s, %s\n", f.cpus, f.memTotal, runtime.GOOS, runtime.GOARCH, f.goVer)
	fmt.Fprintf(w, "postgres: %s\n", f.pgVer)
	var parts []string
	for _, s := range f.settings {
		parts = append(parts, s[0]+"="+s[1])
	}
	fmt.Fprintf(w, "settings: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "load:     %s at start (other processes on this machine share its CPUs and disk)\n", loadAvg())
}

// loadAvg is the 1, 5 and 15 minute load averages from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// memTotal reads MemTotal from /proc/meminfo ("unknown" elsewhere).
func memTotal() string {
	fh, err := os.Open("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseFloat(fields[1], 64)
			if err != nil {
				break
			}
			return fmt.Sprintf("%.1f GiB", kb/1024/1024)
		}
	}
	return "unknown"
}

// riverVersion is the River module version this binary was built with.
func riverVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "(unknown version)"
}
