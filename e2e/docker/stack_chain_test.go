package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/client/txntoken"
)

// hop is what a consumer of the call chain answers: the caller's access
// token's subject and client, the Txn-Token it verified, and the next
// hop's answer.
type hop struct {
	Orders      []json.RawMessage `json:"orders"`
	Invoices    []json.RawMessage `json:"invoices"`
	Subject     string            `json:"subject"`
	ClientID    string            `json:"client_id"`
	Transaction struct {
		Txn      string `json:"txn"`
		Subject  string `json:"sub"`
		Scope    string `json:"scope"`
		Workload string `json:"req_wl"`
	} `json:"transaction"`
	Next *hop `json:"next"`
}

// checkCallChain: GET /orders through nginx with the demo client's token
// crosses two hops with one Transaction Token: nginx's auth_request mints
// it, the consumer verifies it and calls billing with it and a token of its
// own (orders-service, whose secret init wrote into service-auth); billing
// verifies both and sees the same txn as the consumer, sub the token's
// subject, scope the route's, req_wl the client, its caller orders-service.
// A valid Txn-Token the client sends along, one the issuer minted for it
// moments before, is replaced by nginx's: neither hop sees its txn. billing
// is not reachable through the gateway.
func checkCallChain(ctx context.Context, t *testing.T, g *gateway) {
	p := loadCompose(t, true)
	caller := env(t, service(t, p, "consumer"))["CONSUMER_NEXT_CLIENT_ID"]
	tok, err := g.tryIssue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A client may ask for a Txn-Token of its own (GET /token/validate is
	// routed to the issuers): a real one, of an earlier transaction.
	status, header, body := g.get(ctx, t, "/token/validate?scope=orders:read&txn_token=1", tok, "")
	earlier := header.Get(txntoken.Header)
	if status != http.StatusOK || earlier == "" {
		t.Fatalf("GET /token/validate?txn_token=1 through the gateway: %d %s, Txn-Token %q; want 200 with one", status, body, earlier)
	}
	earlierTxn := txnOf(t, earlier)

	for _, sent := range []string{"", earlier} {
		status, _, body := g.get(ctx, t, "/orders", tok, sent)
		var first hop
		if status != http.StatusOK || json.Unmarshal([]byte(body), &first) != nil || first.Next == nil {
			t.Fatalf("GET /orders (Txn-Token sent: %v): %d %s; want 200 with billing's answer", sent != "", status, body)
		}
		second := first.Next
		t.Logf("GET /orders (Txn-Token sent: %v): the consumer saw txn %s, billing %s (sub %s, scope %s, req_wl %s, caller %s)",
			sent != "", first.Transaction.Txn, second.Transaction.Txn, second.Transaction.Subject, second.Transaction.Scope,
			second.Transaction.Workload, second.ClientID)
		if first.Transaction.Txn == "" || second.Transaction != first.Transaction {
			t.Errorf("the consumer saw Txn-Token %+v, billing %+v: want the same", first.Transaction, second.Transaction)
		}
		if second.Transaction.Subject != "demo" || first.Subject != "demo" || second.Transaction.Scope != "orders:read" || second.Transaction.Workload != "demo" {
			t.Errorf("billing saw sub %q scope %q req_wl %q (the consumer's caller %q): want demo, orders:read, demo",
				second.Transaction.Subject, second.Transaction.Scope, second.Transaction.Workload, first.Subject)
		}
		if first.ClientID != "demo" || second.ClientID != caller || len(first.Orders) == 0 || len(second.Invoices) == 0 {
			t.Errorf("callers: the consumer's %q, billing's %q; orders %d, invoices %d; want demo, %s, both", first.ClientID, second.ClientID,
				len(first.Orders), len(second.Invoices), caller)
		}
		if first.Transaction.Txn == earlierTxn {
			t.Errorf("the consumer saw txn %s, the Txn-Token's the client got before: nginx passed a client's Txn-Token on", earlierTxn)
		}
	}
	if status, _, body := g.get(ctx, t, "/invoices", tok, ""); status != http.StatusNotFound {
		t.Errorf("GET /invoices through the gateway: %d %s, want 404: billing is reached through the consumer alone", status, body)
	}
}

// get sends GET path to the gateway with the access token and, unless
// empty, a Txn-Token header.
func (g *gateway) get(ctx context.Context, t *testing.T, path string, tok issued, txn string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, stackGateway+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	if txn != "" {
		req.Header.Set(txntoken.Header, txn)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, resp.Header, string(body)
}

// txnOf reads the txn of a Txn-Token, unverified (the hops verify it).
func txnOf(t *testing.T, raw string) string {
	t.Helper()
	parts := strings.Split(raw, ".")
	var c struct{ Txn string }
	if len(parts) != 3 {
		t.Fatalf("a Txn-Token of %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.Txn == "" {
		t.Fatal(fmt.Errorf("a Txn-Token's claims: %w, txn %q", err, c.Txn))
	}
	return c.Txn
}
