package handlers_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/internal/logtest"
)

// TestAuditEvents: each security action logs its event (docs/audit.md)
// with the fields that say who did what, and never the token itself.
func TestAuditEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// act does the action and returns the fields the event must hold.
		act func(t *testing.T, e *env) (event string, want map[string]string)
	}{
		{"token revoked", func(t *testing.T, e *env) (string, map[string]string) {
			tok := e.issue(t, e.Normal, nil)
			e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {tok.AccessToken}})
			return "token.revoked", map[string]string{"jti": strings.Trim(string(tok.JTI), `"`), "client_id": e.Normal.ID}
		}},
		{"revoking another client's token", func(t *testing.T, e *env) (string, map[string]string) {
			tok := e.issue(t, e.Normal, nil)
			e.post(t, "/token/revoke", &e.Gateway, url.Values{"token": {tok.AccessToken}})
			return "token.revoke_refused", map[string]string{"client_id": e.Gateway.ID}
		}},
		{"subject revoked", func(t *testing.T, e *env) (string, map[string]string) {
			e.do(t, http.MethodDelete, "/subjects/alice/tokens", nil, http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}})
			return "subject.revoked", map[string]string{"subject": "alice", "client_id": e.Admin.ID}
		}},
		{"client revoked", func(t *testing.T, e *env) (string, map[string]string) {
			e.do(t, http.MethodDelete, "/clients/"+e.Normal.ID+"/tokens", nil, http.Header{"Authorization": {basic(e.Admin.ID, e.Admin.Secret)}})
			return "client.revoked", map[string]string{"client": e.Normal.ID, "client_id": e.Admin.ID}
		}},
		{"admin route refused", func(t *testing.T, e *env) (string, map[string]string) {
			e.do(t, http.MethodDelete, "/subjects/alice/tokens", nil, http.Header{"Authorization": {basic(e.Normal.ID, e.Normal.Secret)}})
			return "admin.refused", map[string]string{"client_id": e.Normal.ID, "route": "/subjects/:subject/tokens"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := new(logtest.Buffer)
			e := newEnv(t, withLogger(slog.New(slog.NewJSONHandler(log, nil))))
			event, want := tc.act(t, e)
			events := log.Events(t, event)
			if len(events) != 1 {
				t.Fatalf("%d %s events, want 1; log:\n%s", len(events), event, log)
			}
			want["addr"] = "127.0.0.1"
			for k, v := range want {
				if got := events[0][k]; got != v {
					t.Errorf("%s: %s = %v, want %q", event, k, got, v)
				}
			}
			if strings.Contains(log.String(), ".eyJ") {
				t.Errorf("the log holds a token:\n%s", log)
			}
		})
	}
}

// TestAuditNoEventForNoToken: revoking what is not a token of ours
// answers 200 (RFC 7009) but revokes nothing, and logs no token.revoked.
func TestAuditNoEventForNoToken(t *testing.T) {
	t.Parallel()
	log := new(logtest.Buffer)
	e := newEnv(t, withLogger(slog.New(slog.NewJSONHandler(log, nil))))
	if r := e.post(t, "/token/revoke", &e.Normal, url.Values{"token": {"garbage"}}); r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200", r.Status)
	}
	if got := log.Events(t, "token.revoked"); len(got) != 0 {
		t.Errorf("token.revoked logged for no token: %v", got)
	}
}

// TestAuditAddr: the address events name (and the failed-authentication
// limit keys) is the TCP peer's, unless the peer is a trusted proxy: then
// the last address X-Forwarded-For gives that is not a trusted proxy. A
// DPoP forwarder is not one.
func TestAuditAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		proxies    []string
		forwarders []string
		xff        string
		want       string
	}{
		{"no proxy trusted: the header is ignored", nil, nil, "203.0.113.9", "127.0.0.1"},
		{"the peer is trusted", []string{"127.0.0.1"}, nil, "203.0.113.9", "203.0.113.9"},
		{"only the last hop counts", []string{"127.0.0.0/8"}, nil, "198.51.100.1, 203.0.113.9", "203.0.113.9"},
		{"trusted proxies in the chain are skipped", []string{"127.0.0.1", "10.0.0.0/8"}, nil, "203.0.113.9, 10.1.2.3", "203.0.113.9"},
		{"another proxy is trusted, not the peer", []string{"10.0.0.0/8"}, nil, "203.0.113.9", "127.0.0.1"},
		{"a trusted peer without the header", []string{"127.0.0.1"}, nil, "", "127.0.0.1"},
		{"a DPoP forwarder names no client", nil, []string{"127.0.0.1"}, "203.0.113.9", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := new(logtest.Buffer)
			e := newEnv(t, withLogger(slog.New(slog.NewJSONHandler(log, nil))), withTrustedProxies(tc.proxies...),
				withDPoPForwarders(tc.forwarders...))
			hdr := http.Header{"Authorization": {basic(e.Normal.ID, e.Normal.Secret)}}
			if tc.xff != "" {
				hdr.Set("X-Forwarded-For", tc.xff)
			}
			hdr.Set("X-Real-IP", "192.0.2.66") // never read
			e.do(t, http.MethodDelete, "/subjects/alice/tokens", nil, hdr)
			events := log.Events(t, "admin.refused")
			if len(events) != 1 {
				t.Fatalf("%d admin.refused events, want 1; log:\n%s", len(events), log)
			}
			if got := events[0]["addr"]; got != tc.want {
				t.Errorf("addr %v, want %s", got, tc.want)
			}
		})
	}
}
