package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// loopbackOnly is the rule the tool keeps: it generates load, and load goes
// only to this machine.
const loopbackOnly = "gitlease-load sends only to this machine: the host must be localhost, an address in 127.0.0.0/8 or ::1"

// checkLoopbackURL returns an error unless raw is an http(s) URL whose host
// is localhost, an IPv4 loopback address (127.0.0.0/8) or ::1. Names other
// than localhost are refused without being resolved.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("--url %q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("--url %q is not an http or https URL", raw)
	}
	if !loopbackHost(u.Hostname()) {
		return fmt.Errorf("--url %q: host %q refused; %s", raw, u.Hostname(), loopbackOnly)
	}
	return nil
}

// checkLoopbackDSN returns an error unless every host of the PostgreSQL
// connection string dsn is a loopback one or a Unix socket directory.
func checkLoopbackDSN(dsn string) error {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		// pgconn's message may quote the string, password included.
		return fmt.Errorf("DATABASE_URL is not a valid PostgreSQL connection string")
	}
	hosts := []string{cfg.Host}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(h, "/") && !loopbackHost(h) {
			return fmt.Errorf("DATABASE_URL: host %q refused; gitlease-load connects only to this machine's PostgreSQL (localhost, 127.0.0.0/8, ::1 or a Unix socket)", h)
		}
	}
	return nil
}

// loopbackHost reports whether host (no port, IPv6 without brackets) is
// localhost or a loopback IP address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

// newHTTPClient returns a client for the load: keep-alive connections
// enough for concurrency, no proxy, no redirects followed, and a dialer
// that refuses any address that is not loopback (so even a name that
// resolves elsewhere goes nowhere).
func newHTTPClient(concurrency int, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{
		Timeout: 5 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: %w", address, err)
			}
			if addr, err := netip.ParseAddr(host); err != nil || !addr.Unmap().IsLoopback() {
				return fmt.Errorf("dial %s refused: %s", address, loopbackOnly)
			}
			return nil
		},
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        concurrency,
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{
		Transport:     tr,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
