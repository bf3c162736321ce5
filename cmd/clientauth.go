package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// authSynopsis is the synopsis of the flags addAuthFlags defines.
const authSynopsis = " [-auth-method M] [-jwks-file F | -jwks-uri URL] [-workload-issuer URL -workload-subject SUB [-workload-jwks-uri URL] [-workload-ca-file F] [-workload-token-file F]]"

// authFlags are the flags that say how a client authenticates
// (docs/clients.md): with a secret, by private_key_jwt with its keys, or
// by a workload identity.
type authFlags struct {
	method, jwksFile, jwksURI                     *string
	wlIssuer, wlSubject, wlJWKSURI, wlCA, wlToken *string
}

// addAuthFlags defines the authentication flags on f.
func addAuthFlags(f *cmdFlags) *authFlags {
	return &authFlags{
		method: f.String("auth-method", "", "token_endpoint_auth_method: client_secret_basic, client_secret_post or private_key_jwt "+
			"(none: a secret, sent either way; private_key_jwt with -jwks-file or -jwks-uri)"),
		jwksFile:  f.String("jwks-file", "", "private_key_jwt: a file of the client's public keys, a JWK Set, written inline as jwks"),
		jwksURI:   f.String("jwks-uri", "", "private_key_jwt: the https URL of the client's public keys (jwks_uri)"),
		wlIssuer:  f.String("workload-issuer", "", "workload identity: the issuer of the workload's tokens, such as https://kubernetes.default.svc.cluster.local"),
		wlSubject: f.String("workload-subject", "", "workload identity: their sub, such as system:serviceaccount:NAMESPACE:NAME"),
		wlJWKSURI: f.String("workload-jwks-uri", "", "workload identity: the issuer's keys (none: from its discovery document)"),
		wlCA:      f.String("workload-ca-file", "", "workload identity: PEM CAs of the key server, such as /var/run/secrets/kubernetes.io/serviceaccount/ca.crt"),
		wlToken:   f.String("workload-token-file", "", "workload identity: a token file sent to the key server, such as /var/run/secrets/kubernetes.io/serviceaccount/token"),
	}
}

// given reports whether any authentication flag was given.
func (a *authFlags) given() bool {
	for _, s := range []*string{a.method, a.jwksFile, a.jwksURI, a.wlIssuer, a.wlSubject, a.wlJWKSURI, a.wlCA, a.wlToken} {
		if *s != "" {
			return true
		}
	}
	return false
}

// apply sets how c authenticates from the flags, dropping what the new way
// does not use (a secret, keys, a workload identity). A client that moves
// to a secret method without a secret is given one: its return, else "".
func (a *authFlags) apply(cmd string, c *clients.Client) (secret string, err error) {
	workload := *a.wlIssuer != "" || *a.wlSubject != "" || *a.wlJWKSURI != "" || *a.wlCA != "" || *a.wlToken != ""
	keys := *a.jwksFile != "" || *a.jwksURI != ""
	switch {
	case workload && (keys || *a.method != ""):
		return "", usageErrorf(cmd, "-workload-* flags go without -auth-method, -jwks-file and -jwks-uri")
	case keys && *a.method != "" && *a.method != clients.AuthPrivateKeyJWT:
		return "", usageErrorf(cmd, "-jwks-file and -jwks-uri are for -auth-method %s", clients.AuthPrivateKeyJWT)
	case *a.jwksFile != "" && *a.jwksURI != "":
		return "", usageErrorf(cmd, "give -jwks-file or -jwks-uri, not both")
	}
	c.KeysRefreshed = time.Time{} // of the keys the client had
	switch {
	case workload:
		dropSecret(c)
		c.TokenEndpointAuthMethod, c.JWKS, c.JWKSURI = "", nil, ""
		c.WorkloadIdentity = &clientauth.WorkloadIdentity{Subject: *a.wlSubject, TrustedIssuer: clientauth.TrustedIssuer{
			Issuer: *a.wlIssuer, JWKSURI: *a.wlJWKSURI, CAFile: *a.wlCA, BearerTokenFile: *a.wlToken}}
	case keys || *a.method == clients.AuthPrivateKeyJWT:
		dropSecret(c)
		c.TokenEndpointAuthMethod, c.WorkloadIdentity = clients.AuthPrivateKeyJWT, nil
		if *a.jwksFile != "" {
			data, err := os.ReadFile(*a.jwksFile)
			if err != nil {
				return "", fmt.Errorf("%s: %w", cmd, err)
			}
			if !json.Valid(data) {
				return "", fmt.Errorf("%s: %s is not JSON", cmd, *a.jwksFile)
			}
			c.JWKS, c.JWKSURI = json.RawMessage(data), ""
		} else if *a.jwksURI != "" {
			c.JWKS, c.JWKSURI = nil, *a.jwksURI
		}
	default:
		c.TokenEndpointAuthMethod, c.JWKS, c.JWKSURI, c.WorkloadIdentity = *a.method, nil, "", nil
		if c.SecretSHA256 == "" {
			s, sum, err := clients.NewSecret()
			if err != nil {
				return "", err
			}
			c.SecretSHA256, secret = sum, s
		}
	}
	return secret, nil
}

// dropSecret removes every secret of c.
func dropSecret(c *clients.Client) {
	c.SecretSHA256, c.SecretExpires, c.PreviousSecretSHA256, c.PreviousSecretExpires = "", time.Time{}, "", time.Time{}
}

// clientSetAuthCmd changes how a client authenticates: see clientSubs.
func clientSetAuthCmd(ctx context.Context, f *cmdFlags, args []string, _ map[string]string, _ time.Time) error {
	file, id := clientFileFlags(f)
	auth := addAuthFlags(f)
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	if !auth.given() {
		return usageErrorf(f.Name(), "give -auth-method, -jwks-file, -jwks-uri or the -workload-* flags")
	}
	var secret string
	var c clients.Client
	w, err := editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
		var err error
		secret, err = auth.apply(f.Name(), &cf.Clients[i])
		c = cf.Clients[i]
		return err
	})
	if err != nil {
		return err
	}
	if secret != "" {
		printSecret(f.stdout, c.ID, secret)
		fmt.Fprintln(f.stdout)
	}
	fmt.Fprintf(f.stdout, "wrote %s: client %q authenticates by %s\n", *file, c.ID, c.Method())
	w.report(ctx, f.stdout, replicas)
	return nil
}

// printNewClient prints a new client's ID and secret (see printSecret),
// or, for a client without a secret, how it authenticates.
func printNewClient(w io.Writer, c clients.Client, secret string) {
	if secret != "" {
		printSecret(w, c.ID, secret)
		return
	}
	fmt.Fprintf(w, "client_id: %s\n(no secret: it authenticates by %s; see docs/clients.md)\n", c.ID, c.Method())
}

// clientRefreshKeysCmd makes the replicas fetch a client's keys again: see
// clientSubs. The entry's keys_refreshed changes (to now, or a second past
// its value, so that two runs within a second both change it), and a
// reload drops the fetched keys of a client whose entry changed
// (clients.Registry.KeysChanged).
func clientRefreshKeysCmd(ctx context.Context, f *cmdFlags, args []string, _ map[string]string, now time.Time) error {
	file, id := clientFileFlags(f)
	replicas := addReplicaFlags(f)
	if err := f.parse(args, "file", "id"); err != nil {
		return err
	}
	var stamp time.Time
	w, err := editClient(ctx, f.Name(), *file, *id, func(cf *clients.File, i int) error {
		c := &cf.Clients[i]
		if c.JWKSURI == "" && c.WorkloadIdentity == nil && len(c.SubjectTokenIssuers) == 0 {
			return fmt.Errorf("%s: client %q has no keys at a URL (no jwks_uri, workload_identity or subject_token_issuers): nothing is fetched for it", f.Name(), c.ID)
		}
		stamp = expiry(now, 0)
		if !stamp.After(c.KeysRefreshed) {
			stamp = c.KeysRefreshed.Add(time.Second)
		}
		c.KeysRefreshed = stamp
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(f.stdout, "wrote %s: client %q keys_refreshed %s: each replica that loads it drops the keys it fetched for the client, and fetches them at their next use\n",
		*file, *id, stamp.Format(time.RFC3339))
	w.report(ctx, f.stdout, replicas)
	return nil
}
