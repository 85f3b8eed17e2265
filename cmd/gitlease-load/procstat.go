package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rssInterval is how often the serve process's resident memory is sampled.
const rssInterval = 500 * time.Millisecond

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// ProcStats is what was observed of the serve process (--pid) during the
// HTTP load.
type ProcStats struct {
	PID int
	// StartRSS, MaxRSS and EndRSS are VmRSS in bytes: before the load, the
	// largest sample (every rssInterval), and at the end.
	StartRSS, MaxRSS, EndRSS int64
	Samples                  int
	// CPU is the user+system CPU time the process used during the load.
	CPU time.Duration
	// Elapsed is the wall time the sampling covered.
	Elapsed time.Duration
	// ReadCalls and WriteCalls are the read and write system calls the
	// process made during the load (syscr, syscw in /proc/<pid>/io; 0 when
	// unreadable). Each round trip to PostgreSQL is one write (pgx sends a
	// statement's messages together) and at least one read, so writes per
	// request less the HTTP answer and the log line count the round trips.
	ReadCalls, WriteCalls int64
}

// Print writes the memory and CPU lines of the report.
func (p *ProcStats) Print(w io.Writer) {
	fmt.Fprintf(w, "serve (pid %d): RSS start %s, max %s, end %s (%d samples every %s)\n",
		p.PID, mib(p.StartRSS), mib(p.MaxRSS), mib(p.EndRSS), p.Samples, rssInterval)
	if p.Elapsed > 0 {
		fmt.Fprintf(w, "serve (pid %d): CPU %.1fs user+system in %.1fs (%.2f cores on average)\n",
			p.PID, p.CPU.Seconds(), p.Elapsed.Seconds(), p.CPU.Seconds()/p.Elapsed.Seconds())
	}
}

// PrintPerRequest writes the system calls per request, n requests.
func (p *ProcStats) PrintPerRequest(w io.Writer, n int) {
	if n > 0 && p.WriteCalls > 0 {
		fmt.Fprintf(w, "serve (pid %d): %.1f write and %.1f read system calls per request (each PostgreSQL round trip is one write)\n",
			p.PID, float64(p.WriteCalls)/float64(n), float64(p.ReadCalls)/float64(n))
	}
}

// PrintCPUPerRequest writes the process's CPU time per request, n requests.
func (p *ProcStats) PrintCPUPerRequest(w io.Writer, name string, n int) {
	if n > 0 && p.CPU > 0 {
		fmt.Fprintf(w, "%s (pid %d): CPU %.3f ms per request (%.1fs user+system, %.2f cores on average)\n",
			name, p.PID, 1000*p.CPU.Seconds()/float64(n), p.CPU.Seconds(), p.CPU.Seconds()/max(p.Elapsed.Seconds(), 1e-9))
	}
}

// mib formats bytes in MiB.
func mib(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB" }

// procSampler samples a process's VmRSS every rssInterval until stopped.
type procSampler struct {
	pid      int
	start    time.Time
	startCPU time.Duration
	startIO  [2]int64 // syscr, syscw
	stop     chan struct{}
	done     sync.WaitGroup

	mu    sync.Mutex
	stats ProcStats
	err   error
}

// startProcSampler takes the first sample of pid and starts sampling.
func startProcSampler(pid int) (*procSampler, error) {
	rss, err := readRSS(pid)
	if err != nil {
		return nil, err
	}
	cpu, err := readCPU(pid)
	if err != nil {
		return nil, err
	}
	s := &procSampler{pid: pid, start: time.Now(), startCPU: cpu, stop: make(chan struct{})}
	s.startIO, _ = readIO(pid) // root or the same user only; optional
	s.stats = ProcStats{PID: pid, StartRSS: rss, MaxRSS: rss, EndRSS: rss, Samples: 1}
	s.done.Add(1)
	go s.loop()
	return s, nil
}

// loop samples until Stop.
func (s *procSampler) loop() {
	defer s.done.Done()
	t := time.NewTicker(rssInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sample()
		}
	}
}

// sample reads VmRSS once, keeping the first error.
func (s *procSampler) sample() {
	rss, err := readRSS(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	s.stats.Samples++
	s.stats.EndRSS = rss
	s.stats.MaxRSS = max(s.stats.MaxRSS, rss)
}

// Stop takes a last sample and returns what was seen; an error if the
// process could not be read (it exited, say).
func (s *procSampler) Stop() (ProcStats, error) {
	close(s.stop)
	s.done.Wait()
	s.sample()
	cpu, cerr := readCPU(s.pid)
	io, ioErr := readIO(s.pid)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Elapsed = time.Since(s.start)
	if cerr == nil {
		st.CPU = cpu - s.startCPU
	}
	if ioErr == nil && s.startIO[1] > 0 {
		st.ReadCalls, st.WriteCalls = io[0]-s.startIO[0], io[1]-s.startIO[1]
	}
	err := s.err
	if err == nil {
		err = cerr
	}
	return st, err
}

// readRSS returns VmRSS of pid in bytes, from /proc/<pid>/status.
func readRSS(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	return parseVmRSS(b)
}

// parseVmRSS finds "VmRSS: <n> kB" in the contents of /proc/<pid>/status.
func parseVmRSS(status []byte) (int64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", strings.TrimSpace(string(line)))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q: %w", strings.TrimSpace(string(line)), err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no VmRSS line (a kernel thread or a zombie?)")
}

// readCPU returns the user+system CPU time pid has used, from
// /proc/<pid>/stat.
func readCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read CPU time of pid %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields after its closing parenthesis start at field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // utime (14), stime (15)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/%d/stat: %w", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// readIO returns syscr and syscw of pid, from /proc/<pid>/io.
func readIO(pid int) ([2]int64, error) {
	var out [2]int64
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return out, fmt.Errorf("read I/O counters of pid %d: %w", pid, err)
	}
	found := 0
	for line := range bytes.Lines(b) {
		name, val, _ := strings.Cut(strings.TrimSpace(string(line)), ": ")
		j := -1
		switch name {
		case "syscr":
			j = 0
		case "syscw":
			j = 1
		}
		if j < 0 {
			continue
		}
		if out[j], err = strconv.ParseInt(val, 10, 64); err != nil {
			return out, fmt.Errorf("unexpected /proc/%d/io line %q: %w", pid, line, err)
		}
		found++
	}
	if found != 2 {
		return out, fmt.Errorf("no syscr and syscw in /proc/%d/io", pid)
	}
	return out, nil
}
