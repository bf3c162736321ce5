package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/clienttest"
)

// A service protects a handler with the middleware: remote mode, the issuer
// asked about every token.
func Example_middleware() {
	issuer, err := clienttest.Start(clienttest.Config{}) // an in-process snowtoken issuer
	if err != nil {
		panic(err)
	}
	defer issuer.Close()

	v, err := client.New(client.Options{IssuerURL: issuer.URL})
	if err != nil {
		panic(err)
	}
	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := client.ClaimsFrom(r.Context())
		fmt.Fprintf(w, "orders of %s", c.Subject)
	})
	srv := httptest.NewServer(v.Middleware(orders, "orders:read"))
	defer srv.Close()

	get := func(tok string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/orders", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			fmt.Println(resp.StatusCode, string(body))
			return
		}
		fmt.Println(resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	ctx := context.Background()
	readTok, _ := issuer.Token(ctx, "orders:read")
	writeTok, _ := issuer.Token(ctx, "orders:write")

	get("")
	get(writeTok)
	get(readTok)
	_ = issuer.Revoke(ctx, readTok)
	get(readTok)
	// Output:
	// 401 Bearer realm="snowtoken"
	// 403 Bearer realm="snowtoken", error="insufficient_scope", scope="orders:read"
	// 200 orders of orders-app
	// 401 Bearer realm="snowtoken", error="invalid_token"
}

// Local mode checks signatures itself; a tampered token never reaches the
// issuer. Revocation is still asked of the issuer (RevocationCheck Check,
// the default).
func Example_localMode() {
	issuer, err := clienttest.Start(clienttest.Config{})
	if err != nil {
		panic(err)
	}
	defer issuer.Close()
	v, err := client.New(client.Options{IssuerURL: issuer.URL, Mode: client.Local})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	tok, _ := issuer.Token(ctx, "orders:read")

	c, err := v.Validate(ctx, tok, "orders:read")
	fmt.Println(c.Subject, c.Scopes, err)

	// Change one character in the middle of the signature, where every bit
	// counts. (The last characters carry the top of a scalar below 2^253 and
	// padding bits, so overwriting them can leave the token as it was.)
	mid := strings.LastIndexByte(tok, '.') + 43
	swap := map[bool]string{false: "A", true: "B"}[tok[mid] == 'A']
	_, err = v.Validate(ctx, tok[:mid]+swap+tok[mid+1:])
	fmt.Println("tampered:", errors.Is(err, client.ErrInvalidToken))

	_ = issuer.Revoke(ctx, tok)
	_, err = v.Validate(ctx, tok)
	fmt.Println("revoked:", errors.Is(err, client.ErrInvalidToken))

	issuer.Close()
	_, err = v.Validate(ctx, tok)
	fmt.Println("issuer down:", errors.Is(err, client.ErrUnavailable))
	// Output:
	// orders-app [orders:read] <nil>
	// tampered: true
	// revoked: true
	// issuer down: true
}
