package main

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/client/credentials"
	"github.com/snowtoken/snowtoken/client/dpop"
)

// call is `consumer call`: a service that calls another with tokens it gets
// with no shared secret, DPoP-bound, every CALL_INTERVAL until ctx ends,
// logging each answer's status. It authenticates to the issuer as client
// CALL_CLIENT_ID with a client assertion: the file CALL_TOKEN_FILE at each
// request (a Kubernetes projected service-account token whose audience is
// the issuer), or a private_key_jwt signed with the PEM key CALL_KEY_FILE.
//
//	SNOWTOKEN_ISSUER_URL  the issuer's public base URL (its /token is asked; required)
//	CALL_CLIENT_ID        the client's ID in the clients file (required)
//	CALL_TOKEN_FILE       the workload's token, or
//	CALL_KEY_FILE         a PKCS #8 private key (Ed25519, P-256 or RSA), with CALL_KEY_ID its kid
//	CALL_URL              what to call, such as http://orders:8081/orders (required)
//	CALL_SCOPE            the scopes to ask for; default all of the client's
//	CALL_INTERVAL         default 10s
func call(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	log := slog.New(slog.NewJSONHandler(stdout, nil))
	issuer, id, target := strings.TrimRight(getenv("SNOWTOKEN_ISSUER_URL"), "/"), getenv("CALL_CLIENT_ID"), getenv("CALL_URL")
	if issuer == "" || id == "" || target == "" {
		return errors.New("call: SNOWTOKEN_ISSUER_URL, CALL_CLIENT_ID and CALL_URL are required")
	}
	interval, err := time.ParseDuration(cmp.Or(getenv("CALL_INTERVAL"), "10s"))
	if err != nil || interval <= 0 {
		return fmt.Errorf("CALL_INTERVAL: want a positive duration such as 10s")
	}
	assertion, err := assertionOf(getenv, id, issuer)
	if err != nil {
		return err
	}
	prover, err := dpop.GenerateProver() // a key of this process's own: a token copied out of it is useless
	if err != nil {
		return err
	}
	proofs := &dpop.Transport{Prover: prover}
	src, err := credentials.New(credentials.Options{TokenURL: issuer + "/token", ClientID: id, Assertion: assertion,
		Scope: getenv("CALL_SCOPE"), HTTPClient: &http.Client{Transport: proofs, Timeout: issuerTimeout}})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &credentials.Transport{Source: src, Base: proofs}, Timeout: issuerTimeout}
	log.Info("calling", "url", target, "client_id", id, "every", interval.String(), "dpop_jkt", prover.Thumbprint())
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		status, err := callOnce(ctx, hc, target)
		if err != nil {
			log.Warn("call failed", "url", target, "err", err)
		} else {
			log.Info("called", "url", target, "status", status)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// assertionOf is the client assertion the environment names.
func assertionOf(getenv func(string) string, id, audience string) (func(context.Context, time.Time) (string, error), error) {
	tokenFile, keyFile := getenv("CALL_TOKEN_FILE"), getenv("CALL_KEY_FILE")
	switch {
	case (tokenFile == "") == (keyFile == ""):
		return nil, errors.New("call: set one of CALL_TOKEN_FILE and CALL_KEY_FILE")
	case tokenFile != "":
		return credentials.FileAssertion(tokenFile), nil
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("CALL_KEY_FILE: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("CALL_KEY_FILE: no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CALL_KEY_FILE: %w", err)
	}
	return credentials.KeyAssertion(id, audience, key, getenv("CALL_KEY_ID"))
}

// callOnce GETs target and returns the answer's status.
func callOnce(ctx context.Context, hc *http.Client, target string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
