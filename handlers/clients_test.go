package handlers_test

import (
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/filetest"
	"github.com/snowtoken/snowtoken/token/clients"
)

// TestRemovedOrDisabledClientsTokens: once a client is removed from the
// clients file, or disabled, the tokens it holds stop validating and
// introspect as inactive, and it cannot get new ones; other clients'
// tokens are untouched.
func TestRemovedOrDisabledClientsTokens(t *testing.T) {
	e := newEnv(t)
	normal := e.issue(t, e.Normal, nil)
	gateway := e.issue(t, e.Gateway, url.Values{"subject": {"ceo"}})
	short := e.issue(t, e.Short, nil)

	// The operator's new clients file: Normal removed, Gateway disabled.
	var list []clients.Client
	for _, c := range []client{e.Gateway, e.Admin, e.Short} {
		tc := clients.Client{ID: c.ID, SecretSHA256: filetest.SHA256Hex(e.secrets[c.ID]), Scopes: []string{"orders:read", "orders:write"}}
		tc.Disabled = c.ID == e.Gateway.ID
		tc.Admin = c.ID == e.Admin.ID
		tc.MaySetSubject = c.ID == e.Gateway.ID
		list = append(list, tc)
	}
	cs, err := clients.New(list)
	if err != nil {
		t.Fatal(err)
	}
	serve := e.serveWith(t, cs)
	validate := func(tok string) int {
		req := httptest.NewRequest(http.MethodGet, "/token/validate", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return serve(req).Code
	}
	introspect := func(tok string) string {
		req := httptest.NewRequest(http.MethodPost, "/token/introspect", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", formType)
		req.SetBasicAuth(e.Admin.ID, e.Admin.Secret)
		return serve(req).Body.String()
	}
	for name, tok := range map[string]string{"removed client": normal.AccessToken, "disabled client": gateway.AccessToken} {
		if code := validate(tok); code != http.StatusUnauthorized {
			t.Errorf("%s's token: validate %d, want 401", name, code)
		}
		if body := introspect(tok); body != `{"active":false}` {
			t.Errorf("%s's token: introspect %s, want inactive", name, body)
		}
	}
	if code := validate(short.AccessToken); code != http.StatusOK {
		t.Errorf("a live client's token: validate %d, want 200", code)
	}
	req := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", formType)
	req.SetBasicAuth(e.Gateway.ID, e.Gateway.Secret)
	if rec := serve(req); rec.Code != http.StatusUnauthorized {
		t.Errorf("a disabled client asks for a token: %d %s, want 401", rec.Code, rec.Body)
	}
}

// serveWith returns what serves a request through another engine on the
// env's service, with clients as the clients file now reads.
func (e *env) serveWith(tb testing.TB, cs *clients.Registry) func(*http.Request) *httptest.ResponseRecorder {
	tb.Helper()
	h, err := handlers.New(handlers.Options{Service: e.Svc, Clients: cs, IDs: e.IDs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return func(req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
}

// TestClientSecretRotation: a client whose secret was rotated gets tokens
// with the new secret and with the previous one until the previous one's
// expiry, by the service's clock, and not after: then 401 invalid_client
// saying the secret has expired. A token got with the previous secret stays
// valid after it: rotation rejects no token.
func TestClientSecretRotation(t *testing.T) {
	e := newEnv(t)
	oldSecret, oldSum, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	newSecret, newSum, err := clients.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	previousExpires := e.Clock.Now().Add(30 * time.Minute)
	cs, err := clients.New([]clients.Client{{
		ID: "rotating", SecretSHA256: newSum, Scopes: []string{"orders:read"},
		PreviousSecretSHA256: oldSum, PreviousSecretExpires: previousExpires,
	}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := handlers.New(handlers.Options{Service: e.Svc, Clients: cs, IDs: e.IDs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	rotated := *e
	rotated.URL, rotated.HTTP = srv.URL, srv.Client()
	oldClient, newClient := client{ID: "rotating", Secret: oldSecret}, client{ID: "rotating", Secret: newSecret}

	rotated.issue(t, newClient, nil)
	tok := rotated.issue(t, oldClient, nil)
	e.Clock.Set(previousExpires.Add(-time.Second))
	rotated.issue(t, oldClient, nil)

	e.Clock.Set(previousExpires)
	r := rotated.post(t, "/token", &oldClient, url.Values{"grant_type": {"client_credentials"}})
	wantError(t, r, http.StatusUnauthorized, "invalid_client")
	wantBasicChallenge(t, r)
	if desc, _ := r.object(t)["error_description"].(string); !strings.Contains(desc, "expired") {
		t.Errorf("the expired previous secret: error_description %q, want it to say the secret expired", desc)
	}
	rotated.issue(t, newClient, nil)
	if r := rotated.validate(t, tok.AccessToken); r.Status != http.StatusOK {
		t.Errorf("a token got with the previous secret, after its expiry: validate %d %s, want 200", r.Status, r.Body)
	}
}

// TestSecretExpiryMetric: the metrics hold, for each client whose secret
// has an expiry and which is not disabled, the expiry as a Unix time.
func TestSecretExpiryMetric(t *testing.T) {
	e := newEnv(t)
	expires := time.Date(2027, 3, 1, 12, 30, 0, 0, time.UTC)
	sum := filetest.SHA256Hex("secret")
	cs, err := clients.New([]clients.Client{
		{ID: "expiring", SecretSHA256: sum, SecretExpires: expires,
			PreviousSecretSHA256: filetest.SHA256Hex("old"), PreviousSecretExpires: expires.Add(-time.Hour)},
		{ID: "forever", SecretSHA256: sum},
		{ID: "off", SecretSHA256: sum, SecretExpires: expires, Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	scraped := *e
	scraped.Metrics = prometheus.NewRegistry()
	srv, err := handlers.NewServer(handlers.Options{Service: e.Svc, Clients: cs, IDs: e.IDs, Registry: scraped.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{`snowtoken_client_secret_expiry_timestamp_seconds{client_id="expiring"}`: float64(expires.Unix())}
	if got := secretExpirySeries(t, &scraped); !maps.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}

	// A reload (Swap) changes the series: they follow the clients in use.
	reloaded, err := clients.New([]clients.Client{{ID: "forever", SecretSHA256: sum}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Swap(e.Svc, reloaded, handlers.Version{})
	if got := secretExpirySeries(t, &scraped); len(got) != 0 {
		t.Errorf("after a reload to clients without an expiry: series %v, want none", got)
	}
}

// secretExpirySeries scrapes the snowtoken_client_secret_expiry_timestamp_seconds series.
func secretExpirySeries(tb testing.TB, e *env) map[string]float64 {
	tb.Helper()
	got := map[string]float64{}
	for series, value := range e.metrics(tb) {
		if strings.HasPrefix(series, "snowtoken_client_secret_expiry_timestamp_seconds") {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				tb.Fatalf("%s %s: %v", series, value, err)
			}
			got[series] = v
		}
	}
	return got
}
