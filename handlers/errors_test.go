package handlers_test

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/internal/logtest"
)

// TestErrorDescriptions checks that an error says what is wrong in the
// client's terms: the scopes that are missing or not allowed and no others,
// "issuer mismatch" without either issuer. (Every test's env.do checks
// that no description shows the Go error chain.)
func TestErrorDescriptions(t *testing.T) {
	t.Parallel()
	log := new(logtest.Buffer)
	e := newEnv(t, withLogger(slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	tok := e.issue(t, e.Normal, nil)  // orders:read orders:write
	short := e.issue(t, e.Short, nil) // orders:read
	forged := resign(t, tok.AccessToken, e.Key.Private, func(_, c map[string]any) { c["iss"] = "http://127.0.0.1:8080" })
	validate := func(tok, scope string) *response {
		path := "/token/validate"
		if scope != "" {
			path += "?" + url.Values{"scope": {scope}}.Encode()
		}
		return e.do(t, http.MethodGet, path, nil, http.Header{"Authorization": {"Bearer " + tok}})
	}

	tests := []struct {
		name    string
		do      func() *response
		status  int
		code    string
		want    []string // in the description
		notWant []string // not in it
	}{
		{
			name: "issue: a scope the client does not hold",
			do: func() *response {
				return e.post(t, "/token", &e.Normal, url.Values{"grant_type": {"client_credentials"}, "scope": {"orders:read admin orders:write"}})
			},
			status: http.StatusBadRequest, code: "invalid_scope",
			want: []string{`"admin"`}, notWant: []string{"orders:read", "orders:write"},
		},
		{
			name:   "validate: a scope the token lacks",
			do:     func() *response { return validate(short.AccessToken, "orders:read orders:write") },
			status: http.StatusForbidden, code: "insufficient_scope",
			want: []string{`"orders:write"`}, notWant: []string{"orders:read"},
		},
		{
			name:   "validate: another issuer",
			do:     func() *response { return validate(forged, "") },
			status: http.StatusUnauthorized, code: "invalid_token",
			want: []string{"issuer mismatch"}, notWant: []string{testIssuer, "127.0.0.1"},
		},
		{
			name:   "validate: a malformed scope",
			do:     func() *response { return validate(tok.AccessToken, "orders:read  orders:write") },
			status: http.StatusBadRequest, code: "invalid_request",
			want: []string{"scope", "empty entry"},
		},
		{
			name: "issue: a body over the limit",
			do: func() *response {
				return e.do(t, http.MethodPost, "/token", strings.NewReader("scope="+strings.Repeat("a", 70<<10)),
					http.Header{"Content-Type": {formType}, "Authorization": {basic(e.Normal.ID, e.Normal.Secret)}})
			},
			status: http.StatusBadRequest, code: "invalid_request",
			want: []string{"larger than 65536 bytes"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.do()
			wantError(t, r, tt.status, tt.code)
			desc, _ := r.object(t)["error_description"].(string)
			for _, w := range tt.want {
				if !strings.Contains(desc, w) {
					t.Errorf("error_description %q does not say %s", desc, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(desc, w) {
					t.Errorf("error_description %q names %s", desc, w)
				}
			}
		})
	}

	// The issuers are in the debug log, for the operator.
	var logged bool
	for _, rec := range log.Records(t) {
		if rec["msg"] == "request refused" && rec["level"] == "DEBUG" {
			if err, _ := rec["err"].(string); strings.Contains(err, testIssuer) && strings.Contains(err, "http://127.0.0.1:8080") {
				logged = true
			}
		}
	}
	if !logged {
		t.Errorf("no debug record names the expected and the received issuer; log:\n%s", log.String())
	}
}
