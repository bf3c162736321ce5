package token

import (
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

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Client is an OAuth2 client allowed to ask for tokens, as the clients file
// holds it. The secret is kept only as its SHA-256: secrets are generated with
// 256 bits of entropy, so a fast hash with a constant-time compare is as safe as
// a slow one and keeps issuing cheap (bcrypt is why Ory Hydra issues ~500/s).
type Client struct {
	ID            string   `json:"id"`
	SecretSHA256  string   `json:"secret_sha256"`
	Scopes        []string `json:"scopes"`
	MaySetSubject bool     `json:"may_set_subject,omitempty"`
	MaxTTL        Duration `json:"max_ttl,omitempty"`
	Admin         bool     `json:"admin,omitempty"`
	// MayIntrospect lets the client introspect tokens issued to other
	// clients (RFC 7662 §4: the endpoint must not tell any caller about any
	// token). Without it a client sees only its own tokens; see MayIntrospectToken.
	MayIntrospect bool `json:"may_introspect,omitempty"`
	// Disabled cuts the client off: it cannot authenticate, and the tokens
	// it holds no longer validate (Clients.Live), without waiting for them
	// to expire. Removing the client from the file does the same.
	Disabled bool `json:"disabled,omitempty"`

	secretSum [sha256.Size]byte
}

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

// ClientsFile is the JSON document SNOWTOKEN_CLIENTS_FILE points at.
type ClientsFile struct {
	Clients []Client `json:"clients"`
}

// Clients looks clients up by ID.
type Clients struct {
	byID  map[string]*Client
	dummy [sha256.Size]byte // compared against when the ID is unknown, so timing does not tell
}

// NewClients checks every client and indexes them.
func NewClients(list []Client) (*Clients, error) {
	cs := &Clients{byID: make(map[string]*Client, len(list))}
	for i := range list {
		c := list[i]
		if err := checkName(c.ID); err != nil {
			return nil, fmt.Errorf("%w: client %d: id: %w", ErrClientsFile, i, err)
		}
		if _, dup := cs.byID[c.ID]; dup {
			return nil, fmt.Errorf("%w: client %q listed twice", ErrClientsFile, c.ID)
		}
		sum, err := hex.DecodeString(c.SecretSHA256)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%w: client %q: secret_sha256 must be 64 hex digits", ErrClientsFile, c.ID)
		}
		copy(c.secretSum[:], sum)
		for _, s := range c.Scopes {
			if err := checkScopeToken(s); err != nil {
				return nil, fmt.Errorf("%w: client %q: scope %q: %w", ErrClientsFile, c.ID, s, err)
			}
		}
		// Its tokens carry all of them when it asks for none.
		if _, err := ParseScope(strings.Join(c.Scopes, " ")); err != nil {
			return nil, fmt.Errorf("%w: client %q: scopes: %w", ErrClientsFile, c.ID, err)
		}
		cs.byID[c.ID] = &c
	}
	if len(cs.byID) == 0 {
		return nil, fmt.Errorf("%w: no clients", ErrClientsFile)
	}
	return cs, nil
}

// LoadClients reads a clients file so that it means one thing to the issuer
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
func LoadClients(path string) (*Clients, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClientsFile, err)
	}
	var f ClientsFile
	if err := jsonv2.Unmarshal(data, &f, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("%w: %s: %s%w", ErrClientsFile, path, where(f, err), err)
	}
	return NewClients(f.Clients)
}

// where names the client and the field a decoding error is in, such as
// `client 1 ("gw"), field "ADMIN": `, from the error's JSON pointer
// (/clients/1/ADMIN) and the ID decoded before the error, if any.
func where(f ClientsFile, err error) string {
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

// Authenticate returns the client whose ID and secret match, or ErrInvalidClient.
// It takes the same time whether the ID is unknown or the secret wrong.
func (cs *Clients) Authenticate(id, secret string) (*Client, error) {
	sum := sha256.Sum256([]byte(secret))
	c, ok := cs.byID[id]
	want := cs.dummy
	if ok {
		want = c.secretSum
	}
	if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok || c.Disabled {
		return nil, ErrInvalidClient
	}
	return c, nil
}

// All returns a copy of every client, sorted by ID.
func (cs *Clients) All() []Client {
	out := make([]Client, 0, len(cs.byID))
	for _, c := range cs.byID {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Client) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Live reports whether the client id is in the set and not disabled: a token
// issued to any other client is no longer valid. It is a map lookup.
func (cs *Clients) Live(id string) bool {
	c, ok := cs.byID[id]
	return ok && !c.Disabled
}

// NewClientSecret returns a random secret (256 bits, base64url) and the
// hex SHA-256 the clients file stores.
func NewClientSecret() (secret, sha256Hex string, err error) {
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

// HasScopes reports whether every scope in want is one of the client's.
func (c *Client) HasScopes(want []string) bool {
	return containsAll(c.Scopes, want)
}

// containsAll reports whether every string in want is in have, in time
// linear in their lengths: a nested loop while have is short, else a set.
func containsAll(have, want []string) bool {
	if len(have) > 8 && len(want) > 1 {
		set := make(map[string]struct{}, len(have))
		for _, h := range have {
			set[h] = struct{}{}
		}
		for _, w := range want {
			if _, ok := set[w]; !ok {
				return false
			}
		}
		return true
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// maxNameLen bounds subjects and client IDs, which go into Redis keys and headers.
const maxNameLen = 128

// checkName accepts a client ID or subject: 1 to 128 of A-Z a-z 0-9 and
// . _ - : @ +. Braces are excluded because names become Redis hash tags;
// spaces and control characters because they become HTTP headers.
func checkName(s string) error {
	if s == "" || len(s) > maxNameLen {
		return fmt.Errorf("must be 1 to %d characters", maxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-:@+", c) >= 0) {
			return fmt.Errorf("character %q not allowed (use A-Z a-z 0-9 . _ - : @ +)", c)
		}
	}
	return nil
}

// checkScopeToken accepts one scope as RFC 6749 §3.3 defines it: printable
// ASCII other than space, double quote and backslash.
func checkScopeToken(s string) error {
	if s == "" || len(s) > maxNameLen {
		return fmt.Errorf("must be 1 to %d characters", maxNameLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return fmt.Errorf("character %q not allowed in a scope", c)
		}
	}
	return nil
}

// ParseScope splits a space-separated scope parameter (RFC 6749 §3.3) into
// its scopes, dropping repeats. An empty string gives no scopes. More than
// MaxScopes scopes (repeats included) or MaxScopeLen bytes are refused
// before any work that grows with them; parsing is linear.
func ParseScope(s string) ([]string, error) {
	if len(s) > MaxScopeLen {
		return nil, errScopeTooLong
	}
	n := strings.Count(s, " ") + 1
	if n > MaxScopes {
		return nil, errTooManyScopes
	}
	out := make([]string, 0, n)
	var seen map[string]struct{} // for repeats, once a nested loop would cost more
	if n > 8 {
		seen = make(map[string]struct{}, n)
	}
	for f := range strings.SplitSeq(s, " ") {
		if f == "" {
			if n == 1 {
				break
			}
			return nil, fmt.Errorf("%w: scope has an empty entry (use single spaces)", ErrInvalidScope)
		}
		if err := checkScopeToken(f); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidScope, err)
		}
		if seen != nil {
			if _, dup := seen[f]; dup {
				continue
			}
			seen[f] = struct{}{}
		} else if slices.Contains(out, f) {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// ParseScope's refusals of an oversized parameter, made once: refusing
// costs no allocation.
var (
	errScopeTooLong  = fmt.Errorf("%w: longer than %d bytes", ErrInvalidScope, MaxScopeLen)
	errTooManyScopes = fmt.Errorf("%w: more than %d scopes", ErrInvalidScope, MaxScopes)
)
