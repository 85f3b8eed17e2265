package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v66/github"

	github "github.com/gitlease/gitlease/app/github"
	"github.com/gitlease/gitlease/app/githubtest"
)

// countingTransport counts the calls it carries and the most writes that
// were ever in flight at once.
const (
	installation = 4242
	repoID       = 1296269
	repoName     = "octo/widgets"
)

type countingTransport struct {
	calls, writes, inFlight, maxInFlight atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.calls.Add(1)
	if r.Method != http.MethodGet {
		c.writes.Add(1)
		n := c.inFlight.Add(1)
		defer c.inFlight.Add(-1)
		for {
			m := c.maxInFlight.Load()
			if n <= m || c.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func newInstallations(t *testing.T, fake *githubtest.Server, tr http.RoundTripper, writesPerSec float64) *github.Installations {
	t.Helper()
	inst, err := github.NewInstallations(github.Config{
		AppID: fake.AppID, PrivateKey: fake.PrivateKeyPEM, APIURL: fake.URL(), Transport: tr,
		WritesPerSec: writesPerSec, Retries: github.Retries{Initial: 10 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// isLimited reports whether err is a rate limit: the limiter's refusal or
// GitHub's answer.
func isLimited(err error) bool {
	var (
		limited *github.LimitedError
		rate    *gh.RateLimitError
		abuse   *gh.AbuseRateLimitError
	)
	return errors.As(err, &limited) || errors.As(err, &rate) || errors.As(err, &abuse)
}

// TestNoCallStartsWhileAnInstallationIsLimited has goroutines, each with
// clients of its own, call GitHub on three routes of one installation until
// they are told it is limited, while GitHub answers one primary rate limit:
// after that answer no call starts before its reset, on any route, and
// every goroutine learns of the limit from the one answer.
func TestNoCallStartsWhileAnInstallationIsLimited(t *testing.T) {
	t.Parallel()
	fake := githubtest.New(t, githubtest.WithLatency(2*time.Millisecond))
	fake.AddRepo("octo", "widgets", repoID, "main", true)
	fake.AddInstallation(installation, repoName)
	inst := newInstallations(t, fake, nil, 0)
	ctx := context.Background()
	if _, err := inst.Token(ctx, installation); err != nil { // mint the token before the limit
		t.Fatal(err)
	}
	fake.PrimaryRateLimit(1, 5*time.Second)

	// Without a shared limiter each goroutine would run all its calls
	// (GitHub refuses only one), well past the in-flight grace.
	const goroutines, maxCalls = 8, 200
	var told atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range maxCalls {
				c, err := inst.Client(installation)
				if err != nil {
					t.Error(err)
					return
				}
				switch (g + i) % 3 {
				case 0:
					_, _, err = c.Git.GetRef(ctx, "octo", "widgets", "heads/main")
				case 1:
					_, _, err = c.PullRequests.List(ctx, "octo", "widgets", nil)
				default:
					_, _, err = c.Repositories.Get(ctx, "octo", "widgets")
				}
				if isLimited(err) {
					told.Add(1)
					return
				}
				if err != nil {
					t.Errorf("call failed: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := told.Load(); n != goroutines {
		t.Errorf("%d of %d goroutines were told the installation is limited", n, goroutines)
	}
	refused := 0
	for _, r := range fake.Requests() {
		if r.Fault == "primary_rate_limit" {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("GitHub answered %d primary limits, want 1: calls kept coming after the first", refused)
	}
	if n := fake.EarlyCalls(); n != 0 {
		t.Errorf("%d calls started before the rate limit's reset, want 0", n)
	}
}

// TestTokenMintingKeepsTheAppLimit limits the App's JWT with a secondary
// limit: ghinstallation's token refresh, which calls with the JWT, must
// not call GitHub before Retry-After has passed, while the installation's
// own limit is untouched.
func TestTokenMintingKeepsTheAppLimit(t *testing.T) {
	t.Parallel()
	fake := githubtest.New(t)
	fake.AddRepo("octo", "widgets", repoID, "main", true)
	fake.AddInstallation(installation, repoName)
	fake.AddInstallation(installation+1, repoName)
	inst := newInstallations(t, fake, nil, 0)
	ctx := context.Background()
	fake.SecondaryRateLimit(githubtest.KindGetApp, 1, 30)
	if _, err := inst.BotLogin(ctx); !isLimited(err) {
		t.Fatalf("GET /app under a secondary limit: %v, want a rate-limit error", err)
	}
	var wg sync.WaitGroup
	var limited atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := inst.Token(ctx, installation+1)
			if !isLimited(err) {
				t.Errorf("token refresh under the App's limit: %v, want a rate-limit error", err)
				return
			}
			limited.Add(1)
		}()
	}
	wg.Wait()
	if limited.Load() != 4 {
		t.Fatalf("%d of 4 token refreshes were held", limited.Load())
	}
	if n := fake.Count(githubtest.KindAccessToken); n != 0 {
		t.Errorf("%d token refreshes reached GitHub under the App's limit, want 0", n)
	}
	if n := fake.EarlyCalls(); n != 0 {
		t.Errorf("%d calls started before Retry-After, want 0", n)
	}
}

// TestWritesOfOneCredentialRunOneAtATime has goroutines write concurrently
// with one installation: GitHub sees them one at a time, all of them.
func TestWritesOfOneCredentialRunOneAtATime(t *testing.T) {
	t.Parallel()
	fake := githubtest.New(t, githubtest.WithLatency(5*time.Millisecond))
	fake.AddRepo("octo", "widgets", repoID, "main", true)
	fake.AddInstallation(installation, repoName)
	counter := &countingTransport{}
	inst := newInstallations(t, fake, counter, 1000) // paced far above the burst: only "one at a time" is tested here
	ctx := context.Background()
	c, err := inst.Client(installation)
	if err != nil {
		t.Fatal(err)
	}
	base, _, err := c.Git.GetRef(ctx, "octo", "widgets", "heads/main")
	if err != nil {
		t.Fatal(err)
	}
	const writers = 12
	before := counter.writes.Load() // the token mint
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _ := inst.Client(installation)
			_, _, err := c.Git.CreateRef(ctx, "octo", "widgets", &gh.Reference{
				Ref: gh.String(fmt.Sprintf("refs/heads/w%d", i)), Object: &gh.GitObject{SHA: base.Object.SHA},
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := counter.writes.Load() - before; n != writers {
		t.Errorf("%d writes reached GitHub, want %d", n, writers)
	}
	if m := counter.maxInFlight.Load(); m != 1 {
		t.Errorf("%d writes of one installation were in flight at once, want 1", m)
	}
	if n := fake.Succeeded(githubtest.KindCreateRef); n != writers {
		t.Errorf("%d branches created, want %d", n, writers)
	}
}
