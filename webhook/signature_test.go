package webhook_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/gitlease/gitlease/webhook"
)

func TestVerify(t *testing.T) {
	body := []byte(`{"zen":"Design for failure."}`)
	v, err := webhook.NewVerifier("new", "old", "older")
	if err != nil {
		t.Fatal(err)
	}
	// GitHub's documented example: secret "It's a Secret to Everybody",
	// payload "Hello, World!".
	if got, want := webhook.Sign([]byte("It's a Secret to Everybody"), []byte("Hello, World!")),
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"; got != want {
		t.Errorf("Sign = %s, want GitHub's %s", got, want)
	}
	tests := []struct {
		name      string
		signature string
		index     int
		err       error
	}{
		{"first secret", webhook.Sign([]byte("new"), body), 0, nil},
		{"second secret", webhook.Sign([]byte("old"), body), 1, nil},
		{"third secret", webhook.Sign([]byte("older"), body), 2, nil},
		{"upper-case hex", "sha256=" + strings.ToUpper(strings.TrimPrefix(webhook.Sign([]byte("old"), body), "sha256=")), 1, nil},
		{"unknown secret", webhook.Sign([]byte("other"), body), -1, webhook.ErrSignatureMismatch},
		{"missing", "", -1, webhook.ErrSignatureMissing},
		{"sha1 prefix", strings.Replace(webhook.Sign([]byte("new"), body), "sha256=", "sha1=", 1), -1, webhook.ErrSignatureMismatch},
		{"no prefix", strings.TrimPrefix(webhook.Sign([]byte("new"), body), "sha256="), -1, webhook.ErrSignatureMismatch},
		{"not hex", "sha256=xyz", -1, webhook.ErrSignatureMismatch},
		{"truncated", webhook.Sign([]byte("new"), body)[:40], -1, webhook.ErrSignatureMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i, err := v.Verify(tc.signature, body)
			if i != tc.index || !errors.Is(err, tc.err) {
				t.Errorf("Verify = %d, %v; want %d, %v", i, err, tc.index, tc.err)
			}
		})
	}
	if _, err := webhook.NewVerifier(); err == nil {
		t.Error("NewVerifier() with no secret succeeded")
	}
	if _, err := webhook.NewVerifier("a", ""); err == nil {
		t.Error("NewVerifier with an empty secret succeeded")
	}
}

func TestDecodeBody(t *testing.T) {
	json := []byte(`{"action":"opened"}`)
	form := []byte("payload=" + url.QueryEscape(string(json)))
	tests := []struct {
		name, contentType string
		body              []byte
		want              string
		bad               bool
	}{
		{name: "json", contentType: "application/json", body: json, want: string(json)},
		{name: "json with charset", contentType: "application/json; charset=utf-8", body: json, want: string(json)},
		{name: "form", contentType: "application/x-www-form-urlencoded", body: form, want: string(json)},
		{name: "form, upper case", contentType: "Application/X-WWW-Form-Urlencoded", body: form, want: string(json)},
		{name: "form without payload", contentType: "application/x-www-form-urlencoded", body: []byte("a=b"), bad: true},
		{name: "form that does not parse", contentType: "application/x-www-form-urlencoded", body: []byte("payload=%zz"), bad: true},
		{name: "text", contentType: "text/plain", body: json, bad: true},
		{name: "none", contentType: "", body: json, bad: true},
		{name: "multipart", contentType: "multipart/form-data; boundary=x", body: json, bad: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := webhook.DecodeBody(tc.contentType, tc.body)
			var perr *webhook.PayloadError
			if tc.bad {
				if !errors.As(err, &perr) {
					t.Errorf("DecodeBody = %q, %v; want a *PayloadError", got, err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Errorf("DecodeBody = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewMapperRejectsBadPrefix(t *testing.T) {
	for _, prefix := range []string{"a..b/", "with space/", "x:"} {
		if _, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: prefix}); err == nil {
			t.Errorf("prefix %q accepted", prefix)
		}
	}
	for _, prefix := range []string{"", "gitlease/", "bots/gitlease-"} {
		if _, err := webhook.NewMapper(nil, webhook.MapperConfig{BranchPrefix: prefix}); err != nil {
			t.Errorf("prefix %q: %v", prefix, err)
		}
	}
}

// FuzzParseSignature: the header parser never panics, accepts exactly
// "sha256=" and 64 hex digits, and gives back the bytes those digits name.
func FuzzParseSignature(f *testing.F) {
	for _, s := range []string{"", "sha256=", "sha256=" + strings.Repeat("ab", 32), "sha1=00", "sha256=" + strings.Repeat("Z", 64),
		webhook.Sign([]byte("k"), []byte("body")), " sha256=" + strings.Repeat("0", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		mac, err := webhook.ParseSignature(v)
		hexDigits := strings.TrimPrefix(v, "sha256=")
		wellFormed := strings.HasPrefix(v, "sha256=") && len(hexDigits) == 64 &&
			strings.Trim(hexDigits, "0123456789abcdefABCDEF") == ""
		switch {
		case wellFormed && err != nil:
			t.Fatalf("ParseSignature(%q) = %v, want it accepted", v, err)
		case !wellFormed && err == nil:
			t.Fatalf("ParseSignature(%q) accepted a malformed value", v)
		case err != nil && !errors.Is(err, webhook.ErrSignatureMissing) && !errors.Is(err, webhook.ErrSignatureMalformed):
			t.Fatalf("ParseSignature(%q) = %v, want a sentinel error", v, err)
		case err == nil && len(mac) != 32:
			t.Fatalf("ParseSignature(%q) gave %d bytes, want 32", v, len(mac))
		}
	})
}
