package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Stats summarises one measured run: how many requests completed in how
// long, their latencies, and how they were answered.
type Stats struct {
	// Name says what ran: "gitlease" (HTTP) or "baseline".
	Name        string
	Concurrency int
	Rate        float64 // requests/s cap, 0 for none
	// Requests is how many completed (answered or failed).
	Requests int
	// Elapsed runs from the first request's start to the last one's end.
	Elapsed time.Duration
	// Latencies are sorted ascending, one per request.
	Latencies []time.Duration
	// ByStatus counts HTTP statuses ("202", "transport error"); the
	// baseline counts "committed" and "error".
	ByStatus map[string]int
	// ByOutcome counts the answers' outcomes (HTTP only); a refusal without
	// an outcome counts as "-".
	ByOutcome map[string]int
	// BodyBytes is the mean request body size.
	BodyBytes int
}

// Throughput is completed requests per second.
func (s *Stats) Throughput() float64 {
	if s == nil || s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Requests) / s.Elapsed.Seconds()
}

// Percentile returns the p-th percentile (0 < p <= 100) of s.Latencies.
func (s *Stats) Percentile(p float64) time.Duration { return percentile(s.Latencies, p) }

// percentile returns the p-th percentile of sorted (ascending) by the
// nearest-rank method: the smallest value at least p% of the values are
// less than or equal to. It is 0 for no values; p <= 0 gives the minimum,
// p >= 100 the maximum.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// sortLatencies sorts in place and returns its argument.
func sortLatencies(l []time.Duration) []time.Duration {
	slices.Sort(l)
	return l
}

// Print writes the summary in the tool's report format.
func (s *Stats) Print(w io.Writer) {
	rate := "unlimited"
	if s.Rate > 0 {
		rate = strconv.FormatFloat(s.Rate, 'f', -1, 64) + "/s"
	}
	fmt.Fprintf(w, "%s: %d requests in %s at concurrency %d (rate %s, bodies %d bytes on average)\n",
		s.Name, s.Requests, s.Elapsed.Round(time.Millisecond), s.Concurrency, rate, s.BodyBytes)
	fmt.Fprintf(w, "  throughput: %.1f requests/s\n", s.Throughput())
	fmt.Fprintf(w, "  latency:    p50 %s  p90 %s  p99 %s  max %s\n",
		ms(s.Percentile(50)), ms(s.Percentile(90)), ms(s.Percentile(99)), ms(s.Percentile(100)))
	fmt.Fprintf(w, "  status:     %s\n", counts(s.ByStatus))
	if len(s.ByOutcome) > 0 {
		fmt.Fprintf(w, "  outcome:    %s\n", counts(s.ByOutcome))
	}
}

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
}

// counts formats a count map as "k=v k=v", keys sorted.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(m[k])
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, " ")
}
