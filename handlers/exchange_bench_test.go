package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkExchange is a token exchange at POST /token, through the whole
// engine (Redis as the tests have it: SNOWTOKEN_TEST_REDIS_URL for a real
// one), beside a client_credentials issue by the same client: an exchange
// adds the verdict of its subject token (a verification when the token
// is new to the replica, "fresh", and a Redis read) and, with an actor
// token, the actor's. Subject tokens are issued outside the timer. Besides
// ns/op each reports cpu-ns/op (reportCPU), which other load on a shared
// machine inflates less than wall time.
//
//	go test ./handlers -run '^$' -bench Exchange -benchmem
func BenchmarkExchange(b *testing.B) {
	e := exchangeEnv(b, nil)
	y := e.client(billingY)
	post := func(b *testing.B, form string) {
		req := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(form))
		req.Header.Set("Content-Type", formType)
		req.Header.Set("Authorization", basic(y.ID, y.Secret))
		serve(b, e, req)
	}
	exchangeForm := func(subject string, actor string) string {
		f := url.Values{"grant_type": {grantExchange}, "subject_token": {subject}, "subject_token_type": {typeAccess}}
		if actor != "" {
			f["actor_token"], f["actor_token_type"] = []string{actor}, []string{typeAccess}
		}
		return f.Encode()
	}
	b.Run("client_credentials", func(b *testing.B) {
		b.ReportAllocs()
		form := url.Values{"grant_type": {"client_credentials"}}.Encode()
		defer reportCPU(b)()
		for b.Loop() {
			post(b, form)
		}
	})
	subject := e.issue(b, e.APIs, url.Values{"audience": {billingAPI}}).AccessToken
	b.Run("exchange", func(b *testing.B) {
		b.ReportAllocs()
		form := exchangeForm(subject, "")
		defer reportCPU(b)()
		for b.Loop() {
			post(b, form)
		}
	})
	actor := e.issue(b, y, nil).AccessToken
	for _, c := range []struct {
		name  string
		actor string
	}{{"exchange,fresh_subject", ""}, {"exchange,fresh_subject,actor", actor}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			forms := make([]string, b.N)
			for i := range forms {
				forms[i] = exchangeForm(e.issue(b, e.APIs, url.Values{"audience": {billingAPI}}).AccessToken, c.actor)
			}
			b.ResetTimer()
			defer reportCPU(b)()
			for i := range b.N {
				post(b, forms[i])
			}
		})
	}
}
