package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/txntoken"
	"github.com/snowtoken/snowtoken/clienttest"
	"github.com/snowtoken/snowtoken/internal/clocktest"
)

// TestTxnTwoHops: a gateway's validation mints a Txn-Token; the first
// service verifies it with client.TxnVerifier and calls a second through
// client.TxnTransport, which verifies the same token and sees the same
// txn and sub; a Txn-Token expired by then is refused at the second hop.
func TestTxnTwoHops(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Now().Truncate(time.Second))
	is := clienttest.New(t, clienttest.Config{WorkerID: 7, Now: clk.Now, TxnTrustDomain: "shop.internal"})
	verifier, err := client.NewTxnVerifier(client.TxnOptions{IssuerURL: is.URL, TrustDomain: "shop.internal", Now: clk.Now, Leeway: client.NoLeeway})
	if err != nil {
		t.Fatal(err)
	}

	type seen struct{ Txn, Sub, Scope, Workload string }
	second := httptest.NewServer(verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := client.TxnFrom(r.Context())
		_ = json.NewEncoder(w).Encode(seen{c.Txn, c.Subject, c.Scope, c.Workload})
	})))
	defer second.Close()
	out := &http.Client{Transport: client.TxnTransport{}}
	var atFirst seen
	first := httptest.NewServer(verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := client.TxnFrom(r.Context())
		atFirst = seen{c.Txn, c.Subject, c.Scope, c.Workload}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, second.URL, nil)
		resp, err := out.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})))
	defer first.Close()

	// The gateway: validate, asking for a Txn-Token, and pass it on.
	tok := issue(t, is, "orders:read orders:write")
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, is.URL+"/token/validate?scope=orders:read&txn_token=1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	txn := resp.Header.Get(txntoken.Header)
	if resp.StatusCode != http.StatusOK || txn == "" {
		t.Fatalf("validation: %s, Txn-Token %q", resp.Status, txn)
	}
	call := func() (*http.Response, seen) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, first.URL, nil)
		req.Header.Set(txntoken.Header, txn)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s seen
		_ = json.NewDecoder(resp.Body).Decode(&s)
		return resp, s
	}
	resp, atSecond := call()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("two hops: %s", resp.Status)
	}
	if atSecond != atFirst || atSecond.Sub != is.ClientID || atSecond.Scope != "orders:read" || atSecond.Txn == "" || atSecond.Workload != is.ClientID {
		t.Errorf("first hop saw %+v, second %+v: want the same txn and sub, scope orders:read", atFirst, atSecond)
	}

	clk.Add(61 * time.Second) // past the default 60 s
	if resp, _ := call(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an expired Txn-Token: %s, want 401", resp.Status)
	}
}
