package clients

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"
	"unicode"

	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Client is an OAuth2 client allowed to ask for tokens, as the clients file
// holds it (docs/clients.md documents every field). The secret is kept only as
// its SHA-256: secrets are generated with 256 bits of entropy, so a fast hash
// with a constant-time compare is as safe as a slow one and keeps issuing
// cheap (bcrypt is why Ory Hydra issues ~500/s).
type Client struct {
	ID string `json:"id"`
	// SecretSHA256 is the hex SHA-256 of the client's secret: required for
	// a client that authenticates with one, absent for one that sends
	// client assertions (private_key_jwt, workload_identity).
	SecretSHA256 string `json:"secret_sha256,omitempty"`
	// SecretExpires, if set, is when the secret stops authenticating
	// (Hydra's client_secret_expires_at). Zero means never.
	SecretExpires time.Time `json:"secret_expires,omitzero"`
	// PreviousSecretSHA256 is the secret a rotation replaced, which still
	// authenticates until PreviousSecretExpires (required with it), so that
	// a secret rotates with no failed request. Empty means none.
	PreviousSecretSHA256  string    `json:"previous_secret_sha256,omitempty"`
	PreviousSecretExpires time.Time `json:"previous_secret_expires,omitzero"`
	// Description and Owner are for people: what the client is and who
	// answers for it. The issuer only checks that they are one line of
	// printable text.
	Description   string   `json:"description,omitempty"`
	Owner         string   `json:"owner,omitempty"`
	Scopes        []string `json:"scopes"`
	MaySetSubject bool     `json:"may_set_subject,omitempty"`
	MaxTTL        Duration `json:"max_ttl,omitempty"`
	Admin         bool     `json:"admin,omitempty"`
	// MayIntrospect lets the client introspect tokens issued to other
	// clients (RFC 7662 §4: the endpoint must not tell any caller about any
	// token). Without it a client sees only its own tokens; see MayIntrospectToken.
	MayIntrospect bool `json:"may_introspect,omitempty"`
	// RevocationFeed lets the client follow the revocation feed (GET
	// /revocations/events, GET /revocations, POST /revocations/poll; package
	// revfeed), as a service validating tokens locally does. An admin may
	// without it; see MayFollowRevocations.
	RevocationFeed bool `json:"revocation_feed,omitempty"`
	// TokenExchange, Impersonation and SubjectTokenIssuers: see exchange.go.
	TokenExchange       bool                       `json:"token_exchange,omitempty"`
	Impersonation       bool                       `json:"impersonation,omitempty"`
	SubjectTokenIssuers []clientauth.TrustedIssuer `json:"subject_token_issuers,omitempty"`
	// Disabled cuts the client off: it cannot authenticate, and the tokens
	// it holds no longer validate (token.Service.Verdict), without waiting for them
	// to expire. Removing the client from the file does the same.
	Disabled bool `json:"disabled,omitempty"`
	// Audiences are the audiences (aud) the client may ask for with
	// resource or audience, the first being its tokens' aud when it asks for
	// none. Empty means token.Options.Audience only, if set. Taking one away ends
	// the client's tokens for it at once (token.Service.Verdict).
	Audiences []string `json:"audiences,omitempty"`
	// TokenFormat is the format of the client's tokens: FormatJWT (empty
	// means it) or FormatOpaque, which only this service can validate
	// (package token's opaque.go).
	TokenFormat string `json:"token_format,omitempty"`
	// DPoPBoundAccessTokens (RFC 9449 §5.2's client metadata) makes a DPoP
	// proof required with every token request of the client: all of its
	// tokens are bound to a key it holds (cnf.jkt), none is a bearer
	// token. Without it a client may still send a proof and get a bound
	// token.
	DPoPBoundAccessTokens bool `json:"dpop_bound_access_tokens,omitempty"`
	// TokenEndpointAuthMethod (RFC 7591 §2) is how the client authenticates:
	// AuthSecretBasic or AuthSecretPost (with its secret, that way only),
	// or AuthPrivateKeyJWT (an assertion signed with a key of JWKS or
	// JWKSURI; no secret). Empty means, for a client with a secret, either
	// secret method (listed as client_secret_basic, RFC 7591's default),
	// and for a client with WorkloadIdentity, that: see clientauth.
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method,omitempty"`
	// JWKS (RFC 7591 §2: {"keys": [...]}, public keys only) or JWKSURI
	// (https; http only to localhost) holds a private_key_jwt client's
	// keys: exactly one of the two. The URL's set is fetched and cached
	// (clientauth.Fetcher).
	JWKS    json.RawMessage `json:"jwks,omitempty"`
	JWKSURI string          `json:"jwks_uri,omitempty"`
	// WorkloadIdentity, if set, authenticates the client with a token
	// that an issuer the operator trusts made for a workload, such as a
	// Kubernetes projected service-account token: no secret, no keys of
	// its own.
	WorkloadIdentity *clientauth.WorkloadIdentity `json:"workload_identity,omitempty"`
	// KeysRefreshed, for a client whose keys are fetched (JWKSURI,
	// WorkloadIdentity), is when an operator last had them dropped
	// (`snowtoken client refresh-keys`): a reload that finds a client's
	// entry changed in any way, this field or another, drops the key sets
	// fetched for it, and its next assertion fetches them again
	// (KeysChanged). Zero means never.
	KeysRefreshed time.Time `json:"keys_refreshed,omitzero"`

	keys        *clientauth.KeySet // JWKS, parsed
	secretSum   [sha256.Size]byte
	previousSum [sha256.Size]byte // zero without a previous secret
}

// Bounds of the clients file's free text, in bytes.
const (
	maxDescriptionLen = 1024
	maxOwnerLen       = 256
)

// Duration is a time.Duration written in JSON as a string such as "1h".
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "1h0m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a string such as "90m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"1h\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// checkText accepts the free text of a description or an owner: at most
// max bytes, and no control or format characters, so that it stays one line
// in a log, a terminal and `client list`'s table, and reads as it is stored
// (no bidirectional overrides, no invisible characters).
func checkText(s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("character %q not allowed (control or format)", r)
		}
	}
	return nil
}

// MayIntrospectToken reports whether the client may see the claims of a
// token issued to client owner: its own tokens always; any token with
// may_introspect, or as an admin, which already revokes any client's and
// subject's tokens and is the operator's own client.
func (c *Client) MayIntrospectToken(owner string) bool {
	return owner == c.ID || c.MayIntrospect || c.Admin
}

// MayFollowRevocations reports whether the client may read the revocation
// feed: with revocation_feed, or as an admin, which revokes tokens itself.
func (c *Client) MayFollowRevocations() bool { return c.RevocationFeed || c.Admin }

// HasScopes reports whether every scope in want is one of the client's.
func (c *Client) HasScopes(want []string) bool {
	return syntax.ContainsAll(c.Scopes, want)
}
