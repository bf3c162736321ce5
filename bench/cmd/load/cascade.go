package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// The revocation scenario's cascade (-revocation-parent): each revocation
// revokes a parent and measures how long each validator takes to refuse a
// token exchanged from it (RFC 8693: its parents claim names the parent;
// the cascade, docs/revocation.md). The exchanged token is minted here as
// the exchange grant mints it: a token the bench client was issued (so
// that its session exists), its claims signed again with the deployment's
// key, with parents naming a JWT of the same subject issued just before.
var revocationParent = flag.Bool("revocation-parent", false, "in the revocation scenario, revoke a parent instead: each revocation issues a JWT "+
	"and a token exchanged from it (minted here with the deployment's key), revokes the parent and polls the exchanged token; JWTs only")

// exchanger mints exchanged tokens with the deployment's signing key.
type exchanger struct{ key keyset.Key }

// cascade is the revocation scenario's exchanger; nil without
// -revocation-parent.
var cascade *exchanger

// newExchanger reads the signing key at keyPath.
func newExchanger(keyPath string) (*exchanger, error) {
	pem, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	k, err := keyset.ParsePEM(pem)
	if err != nil {
		return nil, err
	}
	return &exchanger{key: k}, nil
}

// child returns the token plain signed again with parents naming parent,
// both JWTs of the same subject.
func (x *exchanger) child(plain, parent string) (string, error) {
	c, err := unverifiedClaims(plain)
	if err != nil {
		return "", err
	}
	p, err := unverifiedClaims(parent)
	if err != nil {
		return "", err
	}
	if p.Subject != c.Subject {
		return "", fmt.Errorf("a parent of subject %q for a token of %q", p.Subject, c.Subject)
	}
	c.Parents = []jwtpolicy.Parent{{ID: p.ID, ClientID: p.ClientID, IssuedAt: p.IssuedAt.Unix()}}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"], t.Header["typ"] = x.key.ID, jwtpolicy.Type
	return t.SignedString(x.key.Private)
}

// unverifiedClaims are the claims of the JWT raw, not verified (it is
// this deployment's, just issued).
func unverifiedClaims(raw string) (jwtpolicy.Claims, error) {
	var c jwtpolicy.Claims
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return c, fmt.Errorf("not a JWT: %.16q…", raw)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return c, err
	}
	return c, json.Unmarshal(b, &c)
}

// issueExchanged issues, at the issuer at issuerURL as basic, a parent
// JWT and a token exchanged from it, and returns both.
func (x *exchanger) issueExchanged(issuerURL, basic string) (parent, child string, err error) {
	if parent, err = issue(issuerURL, basic); err != nil {
		return "", "", err
	}
	plain, err := issue(issuerURL, basic)
	if err != nil {
		return "", "", err
	}
	child, err = x.child(plain, parent)
	return parent, child, err
}
