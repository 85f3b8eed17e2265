package ui

import (
	"errors"
	"mime"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzParseSession feeds cookie values from outside: none may panic, and
// only a value this key signed, unexpired, makes a session.
func FuzzParseSession(f *testing.F) {
	key := sessionKey("fuzz-admin-token", "fuzz-view-token")
	now := time.Unix(1_800_000_000, 0)
	good, _ := newSession(KindAdmin, now, time.Hour)
	f.Add(good.encode(key))
	f.Add(good.encode(sessionKey("other", "")))
	f.Add("v1.admin.1800003600.abc.")
	f.Add("v1.view.99999999999999999999.n.sig")
	f.Add("")
	f.Add("....")
	f.Fuzz(func(t *testing.T, value string) {
		s, err := parseSession(key, value, now)
		if err != nil {
			return
		}
		if s.Kind != KindAdmin && s.Kind != KindView || !s.Expires.After(now) || s.Nonce == "" {
			t.Fatalf("accepted %q as %+v", value, s)
		}
		if s.encode(key) != value {
			t.Fatalf("accepted %q, which is not what encode writes (%q)", value, s.encode(key))
		}
		if !s.checkCSRF(key, s.csrf(key)) || s.checkCSRF(key, "") {
			t.Fatal("CSRF token does not round-trip")
		}
	})
}

// FuzzListFilters feeds query strings from outside to the list pages'
// parsers: none may panic, and a filter that parses renders a query that
// parses to the same filter.
func FuzzListFilters(f *testing.F) {
	f.Add("status=pending&repository=acme/widgets&kind=github_issue&subject=github_issue:1%231")
	f.Add("before=1700000000000000_ffffffff-ffff-ffff-ffff-ffffffffffff")
	f.Add("before=-1_x&outcome=enqueued&event=issues&after=12")
	f.Add("before=9223372036854775807_a")
	f.Add("status=%00&subject=::")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		if it, err := parseItemFilter(q); err == nil {
			again, err := parseItemFilter(it.values())
			if err != nil || again.Status != it.Status || again.Repository != it.Repository || again.Subject != it.Subject || again.Kind != it.Kind {
				t.Fatalf("item filter %+v does not round-trip: %+v %v", it, again, err)
			}
			if it.Paged {
				q2 := it.values()
				q2.Set("before", cursor(it.BeforeAt, it.BeforeID.String()))
				back, err := parseItemFilter(q2)
				if err != nil || !back.BeforeAt.Equal(it.BeforeAt) || back.BeforeID != it.BeforeID {
					t.Fatalf("cursor does not round-trip: %+v %v", back, err)
				}
			}
		}
		if d, err := parseDeliveryFilter(q); err == nil {
			again, err := parseDeliveryFilter(d.values())
			if err != nil || again.Outcome != d.Outcome || again.Event != d.Event {
				t.Fatalf("delivery filter %+v does not round-trip: %+v %v", d, again, err)
			}
		}
		if o, err := parseOutboxFilter(q); err == nil && o.AfterID < 0 {
			t.Fatalf("outbox cursor %d", o.AfterID)
		}
	})
}

// FuzzFormBody feeds form bodies and content types from outside: none may
// panic, a body over MaxForm is never parsed, and only a URL-encoded one
// (or an empty one without a type) gives values.
func FuzzFormBody(f *testing.F) {
	f.Add("application/x-www-form-urlencoded", "token=abc&csrf=x")
	f.Add("application/x-www-form-urlencoded; charset=utf-8", "a=%zz")
	f.Add("multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\nabc\r\n--x--\r\n")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, contentType, body string) {
		v, err := parseFormBody(contentType, -1, strings.NewReader(body))
		if len(body) > MaxForm && !errors.Is(err, errFormTooLarge) {
			t.Fatalf("a %d-byte body was not refused as too large: %v", len(body), err)
		}
		if err != nil {
			return
		}
		mt, _, _ := mime.ParseMediaType(contentType)
		if mt != "application/x-www-form-urlencoded" && !(body == "" && contentType == "") {
			t.Fatalf("a %q body gave values %v", contentType, v)
		}
	})
}
