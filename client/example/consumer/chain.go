package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/credentials"
)

// resources are what the consumer can serve (CONSUMER_RESOURCE): GET
// /<name> for a token with scope <name>:read, answered with these fixed items.
var resources = map[string]any{
	"orders":   []order{{"1001", "snow shovel", 1}, {"1002", "ice scraper", 2}},
	"invoices": []invoice{{"2001", "1001", "24.90 EUR"}, {"2002", "1002", "13.80 EUR"}},
}

type order struct {
	ID       string `json:"id"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

type invoice struct {
	ID    string `json:"id"`
	Order string `json:"order"`
	Total string `json:"total"`
}

// service is the route the consumer serves, as the environment configures
// it (the package doc):
//
//	CONSUMER_RESOURCE          orders (the default) or invoices: GET /<it>
//	                           for a token with scope <it>:read
//	CONSUMER_TXN_TRUST_DOMAIN  with it, the route also requires a Txn-Token of
//	                           this trust domain (the issuers'
//	                           SNOWTOKEN_TXN_TRUST_DOMAIN) in the Txn-Token
//	                           header, verified here with the issuer's JWKS
//	                           (client.TxnVerifier), and the answer holds its
//	                           txn, sub, scope and req_wl ("transaction")
//	CONSUMER_NEXT_URL          with it (and a trust domain), each request calls
//	                           this URL, such as http://billing:8081/invoices,
//	                           forwarding the Txn-Token unchanged
//	                           (client.TxnTransport) with an access token of
//	                           the consumer's own (client credentials); the
//	                           answer holds the next one's ("next"), and is
//	                           502 if that call fails
//	CONSUMER_NEXT_CLIENT_ID    the client to get that token as (required with it)
//	CONSUMER_NEXT_SECRET_FILE  the file holding its secret (required with it)
//	CONSUMER_NEXT_SCOPE        the scopes to ask for; default all of the client's
type service struct {
	resource string
	items    any
	txns     *client.TxnVerifier // nil: no Txn-Token required
	next     *nextHop            // nil: no call
	log      *slog.Logger
}

// transaction is what the answer shows of the request's Txn-Token.
type transaction struct {
	Txn      string `json:"txn"`
	Subject  string `json:"sub"`
	Scope    string `json:"scope"`
	Workload string `json:"req_wl"`
}

// newService reads the route's configuration; the issuer's URL is the
// Validator's, already checked.
func newService(getenv func(string) string, log *slog.Logger) (*service, error) {
	s := &service{resource: cmp.Or(getenv("CONSUMER_RESOURCE"), "orders"), log: log}
	var ok bool
	if s.items, ok = resources[s.resource]; !ok {
		return nil, fmt.Errorf("CONSUMER_RESOURCE=%q: want one of %q", s.resource, slices.Sorted(maps.Keys(resources)))
	}
	issuer := strings.TrimRight(getenv("SNOWTOKEN_ISSUER_URL"), "/")
	if domain := getenv("CONSUMER_TXN_TRUST_DOMAIN"); domain != "" {
		txns, err := client.NewTxnVerifier(client.TxnOptions{IssuerURL: issuer, TrustDomain: domain, Timeout: issuerTimeout, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("CONSUMER_TXN_TRUST_DOMAIN: %w", err)
		}
		s.txns = txns
	}
	next, err := newNextHop(getenv, issuer)
	switch {
	case err != nil:
		return nil, err
	case next != nil && s.txns == nil:
		return nil, errors.New("CONSUMER_NEXT_URL needs CONSUMER_TXN_TRUST_DOMAIN: the call forwards the Txn-Token this consumer verified")
	}
	s.next = next
	return s, nil
}

// handler serves the route: the access token in Authorization (v), with
// the resource's read scope, then the Txn-Token when one is required.
func (s *service) handler(v *client.Validator) http.Handler {
	h := http.Handler(http.HandlerFunc(s.serve))
	if s.txns != nil {
		h = s.txns.Middleware(h)
	}
	return v.Middleware(h, s.resource+":read")
}

// serve answers with the items, who asked (the access token's subject and
// client), the Txn-Token's claims and the next hop's answer; the
// middlewares have checked the tokens.
func (s *service) serve(w http.ResponseWriter, r *http.Request) {
	c, _ := client.ClaimsFrom(r.Context())
	body := map[string]any{s.resource: s.items, "subject": c.Subject, "client_id": c.ClientID}
	if t, ok := client.TxnFrom(r.Context()); ok {
		body["transaction"] = transaction{t.Txn, t.Subject, t.Scope, t.Workload}
	}
	if s.next != nil {
		next, err := s.next.get(r.Context())
		if err != nil {
			s.log.Warn("the next hop failed", "url", s.next.url, "err", err)
			writeJSON(w, http.StatusBadGateway, errorAnswer{"server_error", "a service this one calls failed; retry later"})
			return
		}
		body["next"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

// nextHop is the service the consumer calls on each request.
type nextHop struct {
	url  string
	http *http.Client
}

// newNextHop reads CONSUMER_NEXT_*: nil without CONSUMER_NEXT_URL. Its
// token comes from issuer's /token, for the client whose secret is in the
// file named.
func newNextHop(getenv func(string) string, issuer string) (*nextHop, error) {
	target, id, secretFile, scope := getenv("CONSUMER_NEXT_URL"), getenv("CONSUMER_NEXT_CLIENT_ID"), getenv("CONSUMER_NEXT_SECRET_FILE"), getenv("CONSUMER_NEXT_SCOPE")
	switch {
	case target == "" && (id != "" || secretFile != "" || scope != ""):
		return nil, errors.New("CONSUMER_NEXT_CLIENT_ID, CONSUMER_NEXT_SECRET_FILE and CONSUMER_NEXT_SCOPE are for CONSUMER_NEXT_URL")
	case target == "":
		return nil, nil
	case id == "" || secretFile == "":
		return nil, errors.New("CONSUMER_NEXT_URL needs CONSUMER_NEXT_CLIENT_ID and CONSUMER_NEXT_SECRET_FILE")
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("CONSUMER_NEXT_URL=%q: want an http or https URL such as http://billing:8081/invoices", target)
	}
	secret, err := readSecret("CONSUMER_NEXT_SECRET_FILE", secretFile)
	if err != nil {
		return nil, err
	}
	src, err := credentials.New(credentials.Options{TokenURL: issuer + "/token", ClientID: id, Secret: secret, Scope: scope,
		HTTPClient: &http.Client{Timeout: issuerTimeout}})
	if err != nil {
		return nil, fmt.Errorf("CONSUMER_NEXT_CLIENT_ID: %w", err)
	}
	// The Txn-Token of the request's context, and the consumer's own token.
	hc := &http.Client{Transport: client.TxnTransport{Base: &credentials.Transport{Source: src}}, Timeout: issuerTimeout}
	return &nextHop{url: target, http: hc}, nil
}

// get calls the next hop for the request ctx belongs to and returns its
// answer, a JSON object; anything but a 200 with one is an error.
func (n *nextHop) get(ctx context.Context) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if resp.StatusCode != http.StatusOK {
		var e errorAnswer
		_ = json.Unmarshal(b, &e)
		return nil, fmt.Errorf("%s %s: %s", resp.Status, e.Error, e.Description)
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("the answer is no JSON object: %w", err)
	}
	return b, nil
}
