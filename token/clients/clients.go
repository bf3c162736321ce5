package clients

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snowtoken/snowtoken/internal/refusal"
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

// File is the JSON document SNOWTOKEN_CLIENTS_FILE points at.
type File struct {
	Clients []Client `json:"clients"`
}

// Registry looks clients up by ID.
type Registry struct {
	byID    map[string]*Client
	dummy   [sha256.Size]byte // compared against when the ID is unknown, so timing does not tell
	version string            // the file's short SHA-256; empty when not read from a file
}

// New checks every client and indexes them.
func New(list []Client) (*Registry, error) {
	cs := &Registry{byID: make(map[string]*Client, len(list))}
	for i := range list {
		c := list[i]
		if err := syntax.CheckName(c.ID); err != nil {
			return nil, fmt.Errorf("%w: client %d: id: %w", ErrFile, i, err)
		}
		if _, dup := cs.byID[c.ID]; dup {
			return nil, fmt.Errorf("%w: client %q listed twice", ErrFile, c.ID)
		}
		if err := c.checkMethod(); err != nil {
			return nil, fmt.Errorf("%w: client %q: %w", ErrFile, c.ID, err)
		}
		if err := c.checkSecrets(); err != nil {
			return nil, fmt.Errorf("%w: client %q: %w", ErrFile, c.ID, err)
		}
		if err := checkText(c.Description, maxDescriptionLen); err != nil {
			return nil, fmt.Errorf("%w: client %q: description: %w", ErrFile, c.ID, err)
		}
		if err := checkText(c.Owner, maxOwnerLen); err != nil {
			return nil, fmt.Errorf("%w: client %q: owner: %w", ErrFile, c.ID, err)
		}
		for _, s := range c.Scopes {
			if err := syntax.CheckScope(s); err != nil {
				return nil, fmt.Errorf("%w: client %q: scope %q: %w", ErrFile, c.ID, s, err)
			}
		}
		// Its tokens carry all of them when it asks for none.
		if _, err := syntax.ParseScope(strings.Join(c.Scopes, " ")); err != nil {
			return nil, fmt.Errorf("%w: client %q: scopes: %w", ErrFile, c.ID, err)
		}
		if err := syntax.CheckAudienceList(c.Audiences); err != nil {
			return nil, fmt.Errorf("%w: client %q: audiences: %w", ErrFile, c.ID, err)
		}
		if c.TokenFormat != "" && c.TokenFormat != FormatJWT && c.TokenFormat != FormatOpaque {
			return nil, fmt.Errorf("%w: client %q: token_format %.32q: want %q or %q", ErrFile, c.ID, c.TokenFormat, FormatJWT, FormatOpaque)
		}
		if err := c.checkExchange(); err != nil {
			return nil, fmt.Errorf("%w: client %q: %w", ErrFile, c.ID, err)
		}
		cs.byID[c.ID] = &c
	}
	if len(cs.byID) == 0 {
		return nil, fmt.Errorf("%w: no clients", ErrFile)
	}
	return cs, nil
}

// checkSecrets decodes the client's secret hashes into secretSum and
// previousSum, and checks that a previous secret comes with its expiry. A
// client that authenticates with assertions must have none.
func (c *Client) checkSecrets() error {
	if !c.UsesSecret() {
		if c.SecretSHA256 != "" || !c.SecretExpires.IsZero() || c.PreviousSecretSHA256 != "" || !c.PreviousSecretExpires.IsZero() {
			return fmt.Errorf("a %s client has no secret: remove secret_sha256, secret_expires and the previous secret", c.Method())
		}
		return nil
	}
	if err := decodeSum(c.SecretSHA256, &c.secretSum); err != nil {
		return fmt.Errorf("secret_sha256: %w", err)
	}
	switch {
	case c.PreviousSecretSHA256 == "" && !c.PreviousSecretExpires.IsZero():
		return errors.New("previous_secret_expires without previous_secret_sha256")
	case c.PreviousSecretSHA256 == "":
		return nil
	case c.PreviousSecretExpires.IsZero():
		return errors.New("previous_secret_sha256 needs previous_secret_expires (RFC 3339), when the previous secret stops working")
	}
	if err := decodeSum(c.PreviousSecretSHA256, &c.previousSum); err != nil {
		return fmt.Errorf("previous_secret_sha256: %w", err)
	}
	if c.previousSum == c.secretSum {
		return errors.New("previous_secret_sha256 is the same as secret_sha256")
	}
	return nil
}

// decodeSum decodes a hex SHA-256 into sum.
func decodeSum(s string, sum *[sha256.Size]byte) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return errors.New("must be 64 hex digits (a SHA-256)")
	}
	copy(sum[:], b)
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

// Load reads a clients file so that it means one thing to the issuer
// and to any other reader: member names match exactly, case included, and a
// name given twice is an error (encoding/json took "ADMIN" for admin and kept
// the last of two, so `"admin": false, "ADMIN": true` loaded an admin that
// `jq .admin` calls false). Unknown fields are an error, so a typo in a field
// name does not silently drop a restriction; so is anything after the
// document, such as a second one pasted below it. The error names the client
// and the field.
//
// These are the semantics of encoding/json/v2, which Go 1.26 has only behind
// GOEXPERIMENT=jsonv2; github.com/go-json-experiment/json is the same code
// (and becomes an alias of it once the experiment is on), so moving to the
// standard library is a change of import path.
func Load(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	f, err := ParseFile(data, path)
	if err != nil {
		return nil, err
	}
	cs, err := New(f.Clients)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(data)
	cs.version = hex.EncodeToString(sum[:6]) // `sha256sum F | cut -c1-12`
	return cs, nil
}

// ParseFile decodes the clients file data, read from path (for the
// errors), as Load does, without checking the clients: for a program
// that edits the file, which checks the result with New.
func ParseFile(data []byte, path string) (File, error) {
	var f File
	if err := jsonv2.Unmarshal(data, &f, jsonv2.RejectUnknownMembers(true)); err != nil {
		return File{}, fmt.Errorf("%w: %s: %s%w", ErrFile, path, where(f, err), err)
	}
	return f, nil
}

// Version is the short SHA-256 of the clients file the set was read from
// (`sha256sum F | cut -c1-12`), or empty for a set made in memory.
func (cs *Registry) Version() string { return cs.version }

// where names the client and the field a decoding error is in, such as
// `client 1 ("gw"), field "ADMIN": `, from the error's JSON pointer
// (/clients/1/ADMIN) and the ID decoded before the error, if any.
func where(f File, err error) string {
	var ptr jsontext.Pointer
	var semantic *jsonv2.SemanticError
	var syntactic *jsontext.SyntacticError
	switch {
	case errors.As(err, &semantic):
		ptr = semantic.JSONPointer
	case errors.As(err, &syntactic):
		ptr = syntactic.JSONPointer
	}
	var out []string
	tokens := slices.Collect(ptr.Tokens())
	if len(tokens) >= 2 && tokens[0] == "clients" {
		if i, err := strconv.Atoi(tokens[1]); err == nil {
			client := "client " + tokens[1]
			if i >= 0 && i < len(f.Clients) && f.Clients[i].ID != "" {
				client += fmt.Sprintf(" (%q)", f.Clients[i].ID)
			}
			out = append(out, client)
			tokens = tokens[2:]
		}
	}
	if len(tokens) > 0 {
		out = append(out, fmt.Sprintf("field %q", tokens[0]))
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, ", ") + ": "
}

// Authenticate returns the client whose ID and secret match at time now, or
// ErrInvalidClient (a client without a secret, too: see UsesSecret). The
// secret may be the client's current one until its
// SecretExpires, or its previous one until PreviousSecretExpires. It takes
// the same time whether the ID is unknown or the secret wrong, and whichever
// of the two secrets matches: both are always compared.
//
// A secret that matches but has expired is refused with a description
// saying so: the caller has proved it holds the secret, and "expired" tells
// its operator what to do, as Hydra does.
func (cs *Registry) Authenticate(id, secret string, now time.Time) (*Client, error) {
	sum := sha256.Sum256([]byte(secret))
	c, ok := cs.byID[id]
	current, previous := &cs.dummy, &cs.dummy
	currentLive, previousLive := 0, 0
	if ok {
		current, previous = &c.secretSum, &c.previousSum
		currentLive = secretLive(c.SecretExpires, now)
		if c.PreviousSecretSHA256 != "" {
			previousLive = secretLive(c.PreviousSecretExpires, now)
		}
	}
	currentMatch := subtle.ConstantTimeCompare(sum[:], current[:])
	previousMatch := subtle.ConstantTimeCompare(sum[:], previous[:])
	switch {
	case !ok || c.Disabled || !c.UsesSecret():
		return nil, ErrInvalidClient
	case currentMatch&currentLive|previousMatch&previousLive == 1:
		return c, nil
	case currentMatch|previousMatch == 1: // previousSum is zero without a previous secret: no secret hashes to it
		return nil, errSecretExpired
	}
	return nil, ErrInvalidClient
}

// SecretExpiry returns when secret, which authenticated c (Authenticate),
// stops authenticating: the expiry of c's current secret or of its
// previous one, whichever it is. Zero means never. It hashes secret only
// for a client one of whose secrets expires.
func (c *Client) SecretExpiry(secret string) time.Time {
	if c.SecretExpires.IsZero() && c.PreviousSecretSHA256 == "" {
		return time.Time{}
	}
	if sum := sha256.Sum256([]byte(secret)); subtle.ConstantTimeCompare(sum[:], c.secretSum[:]) == 1 {
		return c.SecretExpires
	}
	return c.PreviousSecretExpires
}

// errSecretExpired is Authenticate's refusal of a right but expired secret.
var errSecretExpired = refusal.New(ErrInvalidClient, "the client secret has expired")

// secretLive is 1 if a secret whose expiry is expires (zero: never) still
// authenticates at now, else 0.
func secretLive(expires, now time.Time) int {
	return boolInt(expires.IsZero() || now.Before(expires))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Dropped returns, sorted, the clients enabled in cs that next removes or
// disables: the clients whose tokens a reload from cs to next ends.
func (cs *Registry) Dropped(next *Registry) []string {
	var out []string
	for id, c := range cs.byID {
		if n, ok := next.byID[id]; !c.Disabled && (!ok || n.Disabled) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// KeysChanged returns the registrations, in cs, of the clients for which
// keys are fetched (jwks_uri, workload_identity, subject_token_issuers)
// and that next removes or whose entry it changes in any way (a field of
// the clients file, keys_refreshed among them): a reload from cs to next
// drops the key sets fetched for them (clientauth.Verifier.Forget), so that
// a key taken out of a set is refused at once, not once the cache's TTL
// has passed.
func (cs *Registry) KeysChanged(next *Registry) []clientauth.Registration {
	var out []clientauth.Registration
	for id, c := range cs.byID {
		reg, _ := c.Assertion()
		if reg.JWKSURI == "" && reg.Workload == nil && len(reg.SubjectTokenIssuers) == 0 {
			continue
		}
		if n, ok := next.byID[id]; !ok || !sameEntry(c, n) {
			out = append(out, reg)
		}
	}
	slices.SortFunc(out, func(a, b clientauth.Registration) int { return strings.Compare(a.ClientID, b.ClientID) })
	return out
}

// sameEntry reports whether a and b are the same entry of the clients
// file: the same fields, as the file writes them.
func sameEntry(a, b *Client) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// Lookup returns the client id, listed whether enabled or not, and whether
// there is one: a map lookup, for the verdict of every request.
func (cs *Registry) Lookup(id string) (*Client, bool) {
	c, ok := cs.byID[id]
	return c, ok
}

// All returns a copy of every client, sorted by ID.
func (cs *Registry) All() []Client {
	out := make([]Client, 0, len(cs.byID))
	for _, c := range cs.byID {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Client) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// NewSecret returns a random secret (256 bits, base64url) and the
// hex SHA-256 the clients file stores.
func NewSecret() (secret, sha256Hex string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	secret = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(secret))
	return secret, hex.EncodeToString(sum[:]), nil
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
