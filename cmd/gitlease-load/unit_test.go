package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name string
		vals []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p90 of 1..100", ms(hundred...), 90, 90 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"max of 1..100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p0 is the minimum", ms(hundred...), 0, 1 * time.Millisecond},
		{"p50 of four: the second", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p51 of four: the third", ms(1, 2, 3, 4), 51, 3 * time.Millisecond},
		{"p99 of ten: the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p90 of ten", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
	} {
		if got := percentile(tc.vals, tc.p); got != tc.want {
			t.Errorf("%s: percentile(p%g) = %s, want %s", tc.name, tc.p, got, tc.want)
		}
	}
	s := &Stats{Latencies: sortLatencies(ms(5, 1, 4, 2, 3)), Requests: 5, Elapsed: 2 * time.Second}
	if s.Percentile(100) != 5*time.Millisecond || s.Percentile(50) != 3*time.Millisecond {
		t.Errorf("Stats.Percentile on unsorted input: max %s p50 %s", s.Percentile(100), s.Percentile(50))
	}
	if s.Throughput() != 2.5 {
		t.Errorf("Throughput = %g, want 2.5", s.Throughput())
	}
}

func TestLoopbackURL(t *testing.T) {
	for _, ok := range []string{
		"http://127.0.0.1:8080/webhook", "http://127.1.2.3/webhook", "https://localhost:8443/webhook",
		"http://LOCALHOST/webhook", "http://[::1]:8080/webhook", "http://[::ffff:127.0.0.1]:80/webhook",
	} {
		if err := checkLoopbackURL(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"http://10.0.0.1/webhook", "http://example.com/webhook", "http://localhost.example.com/webhook",
		"http://128.0.0.1/webhook", "http://[::2]/webhook", "http://0.0.0.0:8080/webhook",
		"http://127.0.0.1.nip.io/webhook", "ftp://127.0.0.1/webhook", "127.0.0.1:8080", "http://[fe80::1%25lo]/",
	} {
		err := checkLoopbackURL(bad)
		if err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.HasPrefix(bad, "http") && strings.Contains(bad, "//") && !strings.Contains(err.Error(), "only to this machine") {
			t.Errorf("%s: message %q does not say why", bad, err)
		}
	}
}

func TestLoopbackDSN(t *testing.T) {
	for _, ok := range []string{
		"postgres://postgres@127.0.0.1:5432/x?sslmode=disable", "postgres://u@localhost/x", "host=/var/run/postgresql dbname=x",
	} {
		if err := checkLoopbackDSN(ok); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"postgres://u@db.example.com/x", "postgres://u@127.0.0.1,10.0.0.2/x"} {
		if err := checkLoopbackDSN(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestDialerRefusesNonLoopback: the transport itself refuses an address
// that is not loopback, before connecting.
func TestDialerRefusesNonLoopback(t *testing.T) {
	c := newHTTPClient(1, time.Second)
	// 192.0.2.0/24 is TEST-NET-1; the refusal comes before any packet.
	_, err := c.Get("http://192.0.2.1:9/")
	if err == nil || !strings.Contains(err.Error(), "only to this machine") {
		t.Errorf("GET to 192.0.2.1: %v, want a refusal", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	base := Options{URL: "http://127.0.0.1:1/webhook", Secret: "s", Concurrency: 1, Count: 1}
	for name, mutate := range map[string]func(*Options){
		"no bound":          func(o *Options) { o.Count = 0 },
		"zero concurrency":  func(o *Options) { o.Concurrency = 0 },
		"shares over 1":     func(o *Options) { o.Replay, o.Collide = 0.6, 0.6 },
		"negative rate":     func(o *Options) { o.Rate = -1 },
		"remote url":        func(o *Options) { o.URL = "http://192.0.2.1/webhook" },
		"no secret":         func(o *Options) { o.Secret = "" },
		"baseline, no dsn":  func(o *Options) { o.Baseline = true },
		"compare, no dsn":   func(o *Options) { o.Compare = true },
		"baseline, compare": func(o *Options) { o.Baseline, o.Compare, o.DSN = true, true, "postgres://127.0.0.1/x" },
	} {
		o := base
		mutate(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := base
	if err := o.validate(); err != nil || o.Repos != 16 || o.BodySize != DefaultBodySize || o.Timeout != 30*time.Second {
		t.Errorf("valid options: %v, defaults %+v", err, o)
	}
}

func TestRunBadFlags(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", "s")
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"--url", "http://example.com/webhook", "--count", "1"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "only to this machine") {
		t.Errorf("stderr %q does not explain the refusal", errOut.String())
	}
	// Secrets come from the environment only (SPEC §3): no flag takes one.
	for _, f := range []string{"--secret", "--dsn"} {
		errOut.Reset()
		if code := run(context.Background(), []string{f, "x", "--count", "1"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "not defined") {
			t.Errorf("%s: exit %d, stderr %q; want it refused as an unknown flag", f, code, errOut.String())
		}
	}
}

func TestProcStats(t *testing.T) {
	rss, err := parseVmRSS([]byte("Name:\tx\nVmPeak:\t  1 kB\nVmRSS:\t   20480 kB\nVmData: 3 kB\n"))
	if err != nil || rss != 20<<20 {
		t.Errorf("parseVmRSS = %d, %v; want 20 MiB", rss, err)
	}
	if _, err := parseVmRSS([]byte("Name:\tkthreadd\n")); err == nil {
		t.Error("parseVmRSS without VmRSS: no error")
	}
	s, err := startProcSampler(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(rssInterval + 100*time.Millisecond)
	st, err := s.Stop()
	if err != nil || st.Samples < 2 || st.MaxRSS <= 0 || st.MaxRSS < st.EndRSS || st.PID != os.Getpid() {
		t.Errorf("sampling this process: %+v, %v", st, err)
	}
}
