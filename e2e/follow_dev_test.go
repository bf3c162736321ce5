package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/revocation"
)

// devConsumer runs a program in dev mode (its embedded Redis) and a
// Validator that follows its revocation feed with the dev client's
// credentials, started (fresh).
func devConsumer(tb testing.TB) (*issuer, *client.Validator) {
	tb.Helper()
	p := startProgram(tb, devEnvVars())
	issuer := "http://localhost:" + p.addr[strings.LastIndexByte(p.addr, ':')+1:]
	v, err := client.New(client.Options{IssuerURL: issuer, Mode: client.Local, RevocationCheck: client.Follow,
		FeedClientID: "dev", FeedClientSecret: p.dev.secret, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { v.Close() })
	ctx, cancel := context.WithTimeout(tb.Context(), waitLimit)
	defer cancel()
	if err := v.Start(ctx); err != nil {
		tb.Fatalf("the feed of go run . never went fresh: %v\n%s", err, p.logs())
	}
	return p, v
}

// TestFollowDev: dev mode serves the revocation feed from its own log in
// process: a Follow consumer goes fresh on its heartbeats, validates the
// tokens it issues without asking it, refuses a token once revoked
// through the issuer and fails closed on a subject's token issued just
// before the subject's revocation, and the snapshot and the poll answer.
func TestFollowDev(t *testing.T) {
	p, v := devConsumer(t)
	alice := p.issueForm(t, p.dev, url.Values{"scope": {"read"}, "subject": {"alice"}})
	alice2 := p.issueForm(t, p.dev, url.Values{"scope": {"read"}, "subject": {"alice"}})
	bob := p.issueForm(t, p.dev, url.Values{"scope": {"read"}, "subject": {"bob"}})
	for _, tok := range []string{alice, alice2, bob} {
		if _, err := v.Validate(t.Context(), tok); err != nil {
			t.Fatalf("a token just issued, followed: %v", err)
		}
	}
	if status, body := p.post(t, "/token/revoke", p.dev, url.Values{"token": {alice}}); status != http.StatusOK {
		t.Fatalf("POST /token/revoke: %d %s", status, body)
	}
	waitFor(t, v, alice, client.ErrInvalidToken)
	if _, err := v.Validate(t.Context(), alice2); err != nil {
		t.Errorf("a token not revoked: %v", err)
	}
	if status, _, body := p.call(t, http.MethodDelete, "/subjects/alice/tokens", &p.dev, "", nil); status/100 != 2 {
		t.Fatalf("DELETE /subjects/alice/tokens: %d %s", status, body)
	}
	// Issued within the leeway before its subject's revocation: the
	// consumer cannot tell which came first, and fails closed.
	waitFor(t, v, alice2, client.ErrUnavailable)
	if _, err := v.Validate(t.Context(), bob); err != nil {
		t.Errorf("another subject's token: %v", err)
	}

	// The snapshot holds both revocations; a poll from its last answers.
	status, _, body := p.call(t, http.MethodGet, "/revocations?nonce=q0n3KZ9kzB4vJ7x1LwYbXbNqk0mJm3h8a9s5uH2Tz0E", &p.dev, "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /revocations: %d %s", status, body)
	}
	var sn revocation.SnapshotClaims
	if err := decodePayload(string(body), &sn); err != nil || len(sn.Tokens) != 1 || len(sn.Subjects) != 1 ||
		!slices.ContainsFunc(sn.Subjects, func(s revocation.RevokedName) bool { return s.Subject == "alice" }) {
		t.Fatalf("the snapshot: %v, %+v", err, sn.SnapshotState)
	}
	if status, body := postJSON(t, p, "/revocations/poll", `{"ack":["`+sn.Last+`"],"returnImmediately":true}`); status != http.StatusOK ||
		!strings.Contains(string(body), `"heartbeat":`) {
		t.Errorf("POST /revocations/poll: %d %s, want 200 with a heartbeat", status, body)
	}
}

// decodePayload decodes a JWT's payload, unverified (the consumer's own
// tests verify it), into v.
func decodePayload(raw string, v any) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// postJSON POSTs body as application/json with the dev client's Basic
// authentication.
func postJSON(tb testing.TB, p *issuer, path, body string) (int, []byte) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, p.url(path), strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("dev", url.QueryEscape(p.dev.secret))
	return doRequest(tb, req)
}

// BenchmarkFollowDevRevoke measures, on go run ., how long after a revoke
// answered 200 a Follow consumer refuses the token: ms_max and ms_median
// over the iterations (the guarantee: within the feed's 100 ms).
func BenchmarkFollowDevRevoke(b *testing.B) {
	p, v := devConsumer(b)
	var took []time.Duration
	for b.Loop() {
		tok := p.issueForm(b, p.dev, url.Values{"scope": {"read"}})
		if _, err := v.Validate(b.Context(), tok); err != nil {
			b.Fatal(err)
		}
		if status, body := p.post(b, "/token/revoke", p.dev, url.Values{"token": {tok}}); status != http.StatusOK {
			b.Fatalf("POST /token/revoke: %d %s", status, body)
		}
		start := time.Now()
		for {
			if _, err := v.Validate(b.Context(), tok); errors.Is(err, client.ErrInvalidToken) {
				break
			}
			if time.Since(start) > waitLimit {
				b.Fatal("the consumer never refused the revoked token")
			}
			time.Sleep(100 * time.Microsecond)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "ms_max")
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms_median")
}
