package handlers_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/internal/logtest"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// audOf returns the aud claim of a token.
func audOf(tb testing.TB, tok string) []string {
	tb.Helper()
	_, claims := segments(tb, tok)
	var out []string
	list, _ := claims["aud"].([]any)
	for _, a := range list {
		out = append(out, a.(string))
	}
	return out
}

// TestIssueAudience covers resource and audience at POST /token: the token's
// aud, and invalid_target for what the client may not ask for or what is
// malformed.
func TestIssueAudience(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name     string
		client   client
		form     url.Values
		want     []string // the token's aud
		wantDesc string   // in the invalid_target error_description, instead
	}{
		{name: "no list: the service's audience", client: e.Normal, want: []string{testAudience}},
		{name: "list: the first is the default", client: e.APIs, want: []string{ordersAPI}},
		{name: "resource", client: e.APIs, form: url.Values{"resource": {reportsAPI}}, want: []string{reportsAPI}},
		{name: "audience alias", client: e.APIs, form: url.Values{"audience": {billingAPI}}, want: []string{billingAPI}},
		{name: "both agreeing", client: e.APIs, form: url.Values{"resource": {reportsAPI}, "audience": {reportsAPI}}, want: []string{reportsAPI}},
		{name: "several resources", client: e.APIs, form: url.Values{"resource": {reportsAPI, "https://reports.test/v1"}}, want: []string{reportsAPI}},
		{name: "several audiences", client: e.APIs, form: url.Values{"audience": {billingAPI, ordersAPI}}, want: []string{billingAPI, ordersAPI}},
		{name: "both disagreeing", client: e.APIs, form: url.Values{"resource": {reportsAPI}, "audience": {billingAPI}}, wantDesc: "resource and audience name different audiences"},
		{name: "not allowed", client: e.APIs, form: url.Values{"audience": {"payroll-api"}}, wantDesc: `may not ask for audience "payroll-api"`},
		{name: "one of several not allowed", client: e.APIs, form: url.Values{"audience": {ordersAPI, "payroll-api"}}, wantDesc: `may not ask for audience "payroll-api"`},
		{name: "another client's", client: e.Normal, form: url.Values{"audience": {billingAPI}}, wantDesc: `may not ask for audience "billing-api"`},
		{name: "too many", client: e.APIs, form: url.Values{"audience": {"a", "b", "c", "d", "e"}}, wantDesc: "more than 4 audiences"},
		{name: "too long", client: e.APIs, form: url.Values{"audience": {strings.Repeat("a", token.MaxAudienceLen+1)}}, wantDesc: "must be 1 to 256"},
		{name: "empty", client: e.APIs, form: url.Values{"audience": {""}}, wantDesc: "must be 1 to 256"},
		{name: "with a space", client: e.APIs, form: url.Values{"audience": {ordersAPI + " " + billingAPI}}, wantDesc: "not allowed in an audience"},
		{name: "resource not absolute", client: e.APIs, form: url.Values{"resource": {billingAPI}}, wantDesc: "not an absolute URI"},
		{name: "resource with a fragment", client: e.APIs, form: url.Values{"resource": {reportsAPI + "#top"}}, wantDesc: "fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"grant_type": {"client_credentials"}}
			for k, v := range tc.form {
				form[k] = v
			}
			r := e.post(t, "/token", &tc.client, form)
			if tc.wantDesc != "" {
				wantError(t, r, http.StatusBadRequest, "invalid_target")
				if d, _ := r.object(t)["error_description"].(string); !strings.Contains(d, tc.wantDesc) {
					t.Errorf("error_description %q, want it to say %q", d, tc.wantDesc)
				}
				return
			}
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			var out issued
			if err := json.Unmarshal(r.Body, &out); err != nil {
				t.Fatal(err)
			}
			if got := audOf(t, out.AccessToken); !slices.Equal(got, tc.want) {
				t.Errorf("aud %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("other parameters still once", func(t *testing.T) {
		r := e.post(t, "/token", &e.APIs, url.Values{"grant_type": {"client_credentials"}, "scope": {"orders:read", "orders:read"}})
		wantError(t, r, http.StatusBadRequest, "invalid_request")
	})
}

// TestValidateAudience covers ?audience= at GET /token/validate: a token for
// one API is refused by another, with the expected audience named and the
// received ones in the debug log only.
func TestValidateAudience(t *testing.T) {
	t.Parallel()
	log := new(logtest.Buffer)
	e := newEnv(t, withLogger(slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	orders := e.issue(t, e.Normal, nil).AccessToken                                 // aud orders-api (the service's)
	billing := e.issue(t, e.APIs, url.Values{"audience": {billingAPI}}).AccessToken // aud billing-api
	both := e.issue(t, e.APIs, url.Values{"resource": {reportsAPI}, "audience": {reportsAPI}}).AccessToken

	validate := func(t *testing.T, tok, query string) *response {
		t.Helper()
		return e.do(t, http.MethodGet, "/token/validate"+query, nil, http.Header{"Authorization": {"Bearer " + tok}})
	}
	q := func(aud string) string { return "?" + url.Values{"audience": {aud}}.Encode() }
	for _, tc := range []struct {
		name, tok, query string
		ok               bool
	}{
		{name: "no audience asked", tok: orders, ok: true},
		{name: "no audience asked, client's own", tok: billing, ok: true},
		{name: "orders token at orders", tok: orders, query: q(ordersAPI), ok: true},
		{name: "billing token at billing", tok: billing, query: q(billingAPI), ok: true},
		{name: "URI audience", tok: both, query: q(reportsAPI), ok: true},
		{name: "with a scope", tok: orders, query: q(ordersAPI) + "&scope=orders:read", ok: true},
		{name: "billing token at orders", tok: billing, query: q(ordersAPI)},
		{name: "orders token at billing", tok: orders, query: q(billingAPI)},
		{name: "orders token at billing, with a held scope", tok: orders, query: q(billingAPI) + "&scope=orders:read"},
		{name: "orders token at billing, with a scope it lacks", tok: orders, query: q(billingAPI) + "&scope=admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validate(t, tc.tok, tc.query)
			if tc.ok {
				if r.Status != http.StatusOK {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				return
			}
			wantError(t, r, http.StatusUnauthorized, "invalid_token")
			wantBearerChallenge(t, r, "invalid_token")
			want, _ := url.ParseQuery(tc.query[1:])
			d, _ := r.object(t)["error_description"].(string)
			if !strings.Contains(d, "audience mismatch") || !strings.Contains(d, `"`+want.Get("audience")+`"`) {
				t.Errorf("error_description %q, want \"audience mismatch\" naming %q", d, want.Get("audience"))
			}
			if got := audOf(t, tc.tok)[0]; strings.Contains(d, got) {
				t.Errorf("error_description %q names the token's audience %q: that goes to the debug log", d, got)
			}
		})
	}
	t.Run("debug log", func(t *testing.T) {
		validate(t, billing, q(ordersAPI))
		var found bool
		for line := range strings.SplitSeq(log.String(), "\n") {
			var rec struct {
				Msg  string   `json:"msg"`
				Want string   `json:"want"`
				Aud  []string `json:"aud"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "audience mismatch" &&
				rec.Want == ordersAPI && slices.Equal(rec.Aud, []string{billingAPI}) {
				found = true
			}
		}
		if !found {
			t.Errorf("no \"audience mismatch\" debug record with want=%q aud=[%q]; log:\n%s", ordersAPI, billingAPI, log)
		}
		if strings.Contains(log.String(), ".eyJ") {
			t.Errorf("a token in the log:\n%s", log)
		}
	})
	for _, tc := range []struct{ name, query string }{
		{"empty", "?audience="},
		{"repeated", "?audience=" + ordersAPI + "&audience=" + ordersAPI},
		{"with a space", "?audience=orders%20api"},
		{"too long", "?audience=" + strings.Repeat("a", token.MaxAudienceLen+1)},
	} {
		t.Run("malformed/"+tc.name, func(t *testing.T) {
			r := validate(t, orders, tc.query)
			wantError(t, r, http.StatusBadRequest, "invalid_request")
			wantBearerChallenge(t, r, "invalid_request")
		})
	}
	t.Run("introspection returns aud", func(t *testing.T) {
		tok := e.issue(t, e.APIs, url.Values{"audience": {ordersAPI, billingAPI}}).AccessToken
		r := e.post(t, "/token/introspect", &e.APIs, url.Values{"token": {tok}})
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		var out struct {
			Active bool     `json:"active"`
			Aud    []string `json:"aud"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatal(err)
		}
		if !out.Active || !slices.Equal(out.Aud, []string{ordersAPI, billingAPI}) {
			t.Errorf("introspection %s, want active with aud [%q %q]", r.Body, ordersAPI, billingAPI)
		}
	})
}

// TestAudienceTakenOff: when the clients file takes an audience off a
// client, the tokens it holds for that audience end at once, at validation
// and introspection; its others go on.
func TestAudienceTakenOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	billing := e.issue(t, e.APIs, url.Values{"audience": {billingAPI}}).AccessToken
	orders := e.issue(t, e.APIs, nil).AccessToken
	for _, tok := range []string{billing, orders} {
		if r := e.validate(t, tok); r.Status != http.StatusOK { // cached now: the new list must still win
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
	}

	// The same service, with the clients file changed: billing taken off.
	list := e.Clients.All()
	for i := range list {
		if list[i].ID == e.APIs.ID {
			list[i].Audiences = []string{ordersAPI, reportsAPI}
		}
	}
	shrunk, err := clients.New(list)
	if err != nil {
		t.Fatal(err)
	}
	serve := e.serveWith(t, shrunk)
	validate := func(tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/token/validate", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return serve(req)
	}
	if w := validate(billing); w.Code != http.StatusUnauthorized || wantOAuthError(t, w) != "invalid_token" {
		t.Errorf("billing token after billing was taken off: %d %s", w.Code, w.Body)
	}
	if w := validate(orders); w.Code != http.StatusOK {
		t.Errorf("orders token: %d %s", w.Code, w.Body)
	}
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/token/introspect", strings.NewReader(url.Values{"token": {billing}}.Encode()))
	req.Header.Set("Content-Type", formType)
	req.Header.Set("Authorization", basic(e.APIs.ID, e.APIs.Secret))
	if w := serve(req); w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"active":false}` {
		t.Errorf("introspecting the billing token: %d %s, want {\"active\":false}", w.Code, w.Body)
	}
}
