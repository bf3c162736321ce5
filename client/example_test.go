package client_test

import (
	"fmt"
	"log"
	"net/http"

	"github.com/snowtoken/snowtoken/client"
)

// A service protects its routes with the middleware, in remote mode: the
// issuer is asked about every token, so a revoked token is refused at once.
// (Runnable versions against a real issuer are in the root module's e2e
// folder.)
func ExampleValidator_Middleware() {
	v, err := client.New(client.Options{IssuerURL: "http://issuer:8080", Audience: "orders-api"})
	if err != nil {
		log.Fatal(err)
	}
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := client.ClaimsFrom(r.Context())
		fmt.Fprintf(w, "orders of %s\n", c.Subject)
	})
	mux := http.NewServeMux()
	mux.Handle("GET /orders", v.Middleware(orders, "orders:read"))
	log.Fatal(http.ListenAndServe(":8081", mux))
}

// Local mode with Skip checks signature, claims and scopes against the
// issuer's JWKS with no call per request; a revoked token then passes until
// it expires, so it suits short-lived tokens.
func ExampleValidator_Authenticate() {
	v, err := client.New(client.Options{
		IssuerURL: "http://issuer:8080", Mode: client.Local, RevocationCheck: client.Skip,
		Audience: "orders-api",
	})
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		c, err := v.Authenticate(r, "orders:read")
		if err != nil {
			v.WriteError(w, r, err) // 401, 403 or 503, as the middleware answers
			return
		}
		fmt.Fprintf(w, "orders of %s\n", c.Subject)
	})
	log.Fatal(http.ListenAndServe(":8081", nil))
}
