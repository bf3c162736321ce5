package clients

import (
	"errors"
	"fmt"

	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// Client authentication methods: the values of token_endpoint_auth_method
// (RFC 7591 §2, the IANA "OAuth Token Endpoint Authentication Methods"),
// and AuthWorkloadIdentity, snowtoken's name for a client with
// WorkloadIdentity, which has no registered value: it is never written in
// the clients file nor listed in the discovery metadata.
const (
	AuthSecretBasic      = "client_secret_basic"
	AuthSecretPost       = "client_secret_post"
	AuthPrivateKeyJWT    = "private_key_jwt"
	AuthWorkloadIdentity = "workload_identity"
)

// AuthMethods are the registered methods the token endpoint accepts, for
// the discovery metadata (token_endpoint_auth_methods_supported).
var AuthMethods = []string{AuthSecretBasic, AuthSecretPost, AuthPrivateKeyJWT}

// checkMethod checks that the client's method and the fields it needs
// agree, and parses its inline key set.
func (c *Client) checkMethod() error {
	hasKeys := len(c.JWKS) > 0 || c.JWKSURI != ""
	if !c.KeysRefreshed.IsZero() && c.JWKSURI == "" && c.WorkloadIdentity == nil && len(c.SubjectTokenIssuers) == 0 {
		return errors.New("keys_refreshed is for a client for which keys are fetched: jwks_uri, workload_identity or subject_token_issuers")
	}
	switch m := c.TokenEndpointAuthMethod; {
	case c.WorkloadIdentity != nil:
		if m != "" || hasKeys {
			return errors.New("workload_identity: no token_endpoint_auth_method, jwks or jwks_uri with it")
		}
		return c.WorkloadIdentity.Check()
	case m == AuthPrivateKeyJWT:
		return c.checkKeys()
	case m != "" && m != AuthSecretBasic && m != AuthSecretPost:
		return fmt.Errorf("token_endpoint_auth_method %.32q: want %s, %s or %s", m, AuthSecretBasic, AuthSecretPost, AuthPrivateKeyJWT)
	case hasKeys:
		return fmt.Errorf("jwks and jwks_uri are for a client whose token_endpoint_auth_method is %s", AuthPrivateKeyJWT)
	case c.SecretSHA256 == "":
		return fmt.Errorf("secret_sha256 is required, unless token_endpoint_auth_method is %s or workload_identity is set", AuthPrivateKeyJWT)
	}
	return nil
}

// checkKeys checks a private_key_jwt client's keys: exactly one of jwks,
// jwks_uri.
func (c *Client) checkKeys() error {
	switch {
	case len(c.JWKS) > 0 && c.JWKSURI != "":
		return errors.New("jwks and jwks_uri: give one")
	case c.JWKSURI != "":
		if err := clientauth.CheckURL(c.JWKSURI); err != nil {
			return fmt.Errorf("jwks_uri: %w", err)
		}
		return nil
	case len(c.JWKS) == 0:
		return fmt.Errorf("a %s client needs jwks or jwks_uri", AuthPrivateKeyJWT)
	}
	ks, err := clientauth.ParseJWKS(c.JWKS)
	if err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	c.keys = ks
	return nil
}

// Method is how the client authenticates: its token_endpoint_auth_method;
// AuthWorkloadIdentity with WorkloadIdentity; AuthSecretBasic for a client
// with a secret that names none (it may use either secret method).
func (c *Client) Method() string {
	switch {
	case c.WorkloadIdentity != nil:
		return AuthWorkloadIdentity
	case c.TokenEndpointAuthMethod != "":
		return c.TokenEndpointAuthMethod
	}
	return AuthSecretBasic
}

// UsesSecret reports whether the client authenticates with a secret.
func (c *Client) UsesSecret() bool {
	m := c.Method()
	return m == AuthSecretBasic || m == AuthSecretPost
}

// MaySendSecretBy reports whether the client may authenticate with its
// secret by method (AuthSecretBasic or AuthSecretPost): the method it
// names, or either if it names none.
func (c *Client) MaySendSecretBy(method string) bool {
	return c.UsesSecret() && (c.TokenEndpointAuthMethod == "" || c.TokenEndpointAuthMethod == method)
}

// Assertion is how the client authenticates with an assertion, and false
// for a client with a secret (whose registration has its subject token
// issuers only).
func (c *Client) Assertion() (clientauth.Registration, bool) {
	reg := clientauth.Registration{ClientID: c.ID, SubjectTokenIssuers: c.SubjectTokenIssuers}
	if c.UsesSecret() {
		return reg, false
	}
	reg.Keys, reg.JWKSURI, reg.Workload = c.keys, c.JWKSURI, c.WorkloadIdentity
	return reg, true
}

// AssertionClient returns the enabled client id that authenticates with
// assertions, or ErrInvalidClient.
func (cs *Registry) AssertionClient(id string) (*Client, clientauth.Registration, error) {
	c, ok := cs.byID[id]
	if !ok || c.Disabled {
		return nil, clientauth.Registration{}, ErrInvalidClient
	}
	reg, ok := c.Assertion()
	if !ok {
		return nil, clientauth.Registration{}, refusal.New(ErrInvalidClient, "this client authenticates with its secret, not an assertion")
	}
	return c, reg, nil
}
