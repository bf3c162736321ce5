// Package dpop checks DPoP proofs (RFC 9449): the proof of possession of a
// key that a client sends, in a DPoP request header, with a token request or
// with a request that presents a DPoP-bound access token. It makes them too,
// for the client side: a Prover signs proofs with a private key, and a
// Transport sends every request with one, following the servers' nonces.
//
// A client of the issuer gets DPoP-bound tokens with x/oauth2's
// clientcredentials through a Transport: its token requests then carry a
// proof, the issuer answers token_type "DPoP", and x/oauth2 sends the token
// as Authorization: DPoP <token>, to which the Transport adds the proof
// with the token's hash:
//
//	prover, err := dpop.GenerateProver() // or dpop.NewProver(key)
//	hc := &http.Client{Transport: &dpop.Transport{Prover: prover}}
//	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
//	cfg := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: "https://issuer.example/token"}
//	api := cfg.Client(ctx) // api.Get("https://orders.example/orders") sends the token and a proof
//
// The tokens are bound to the Prover's key (cnf.jkt = Prover.Thumbprint):
// keep the Prover as long as the tokens.
//
// A proof is a JWS in compact form (three base64url parts joined by dots)
// that the client signs with its private key, carrying the public key in its
// header:
//
//	header  {"typ":"dpop+jwt","alg":"EdDSA"|"ES256","jwk":{public key}}
//	claims  {"jti":"<unique>","htm":"POST","htu":"https://issuer/token","iat":<unix s>,
//	         "ath"?:"<base64url SHA-256 of the access token>","nonce"?:"<server nonce>"}
//
// Checker.Check refuses a proof unless every check passes, in this order
// (RFC 9449 §4.3; the numbers in brackets are its steps). Step [1], exactly
// one DPoP header in the request, is the HTTP layer's, which passes that
// header's value:
//
//  1. The proof is at most Options.MaxLength bytes, checked before anything
//     else so that the work done on any input is bounded and linear in it.
//  2. It is exactly one JWS compact string: three parts of the base64url
//     alphabet without padding, canonically encoded [2].
//  3. The header is one JSON object, names exact and never repeated, of the
//     right types; typ is "dpop+jwt" [4]; it has no "crit"; alg is one of
//     Options.Algorithms, all asymmetric: never "none" nor HS* [5].
//  4. The header's jwk is a public key of the alg's type (OKP/Ed25519 for
//     EdDSA, EC/P-256 for ES256), a valid point, with no private member [7]
//     (ParseJWK).
//  5. The signature verifies with that key [6].
//  6. The claims are one strict JSON object holding jti (at most MaxJTILength
//     bytes), htm, htu and iat (a NumericDate, taken to its second) [3].
//  7. htm is the request's method, exactly [8].
//  8. htu is the request's URL without query and fragment, both compared
//     after RFC 3986 §6.2.2 syntax-based normalisation: scheme and host in
//     lower case, the scheme's default port dropped, an empty path as "/",
//     percent-encodings in upper case and unreserved characters decoded
//     [9]. Dot segments are not removed: a proof whose htu has them matches
//     only a request URL that has them too.
//  9. With Options.Nonce set, the proof carries a nonce that Options.Nonce
//     accepts; otherwise Check returns ErrUseNonce, which the HTTP layer
//     answers with use_dpop_nonce and a fresh DPoP-Nonce header [10].
//  10. iat is no more than Options.MaxAge in the past and no more than
//     Options.Skew in the future [11].
//  11. With Request.AccessToken set, ath is the base64url SHA-256 of it
//     [12].
//  12. The proof was not seen before (RFC 9449 §11.1): Options.Replay
//     records the proof's ID until its Until, and a second proof with the
//     same ID is refused with ErrReplay. Only proofs that passed every check
//     above are recorded, so a forged proof cannot use up another's jti.
//
// What the caller does with an accepted Proof: at the token endpoint, it
// binds the tokens it issues to the key, cnf.jkt = Proof.Thumbprint (RFC
// 9449 §6); at a protected resource, it checks that the access token's
// cnf.jkt equals Proof.Thumbprint [12], which this package cannot do, not
// knowing the token's claims.
//
// The replay record's contract (ReplayCache): Seen(ctx, id, now, until)
// records id until until, on the Checker's clock (now is Check's, expected
// to move forward), and reports whether id was already recorded,
// atomically, so that of two concurrent proofs with the same ID one is
// refused. A shared record on another clock (Redis's) keeps each ID longer
// by the clock skew between its hosts. The ID
// is the base64url SHA-256 of the key's thumbprint and the jti, so a jti is
// unique per key and every ID is 43 bytes whatever the jti. until is the
// last instant at which the proof's iat would still be accepted
// (iat + MaxAge): past it the proof is refused for its age, so the record
// may go. Every checker that accepts proofs for the same URLs must share
// one record (in Redis, SET NX PX per ID: a later package); MemoryReplay
// serves one process and tests.
package dpop

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snowtoken/snowtoken/client/jwk"
)

// Errors of the package. Those returned by Check: each but ErrRequest and ErrReplayRecord (the
// ReplayCache failed) means the proof is refused: invalid_dpop_proof (RFC
// 9449 §7.1), except ErrUseNonce (use_dpop_nonce). A refusal says what was
// wrong with the proof in RFC 9449's terms, which Reason returns for the
// client; the other errors wrap their details with %w.
var (
	ErrProof       = errors.New("dpop: malformed proof")
	ErrType        = errors.New("dpop: typ is not dpop+jwt")
	ErrAlgorithm   = errors.New("dpop: algorithm not allowed")
	ErrJWK         = errors.New("dpop: bad jwk")
	ErrPrivateKey  = errors.New("dpop: jwk holds a private key")
	ErrSignature   = errors.New("dpop: signature does not verify with the jwk")
	ErrClaims      = errors.New("dpop: required claim missing or malformed")
	ErrMethod      = errors.New("dpop: htm is not the request method")
	ErrURL         = errors.New("dpop: htu is not the request URL")
	ErrUseNonce    = errors.New("dpop: nonce missing or not current")
	ErrIssuedAt    = errors.New("dpop: iat outside the accepted window")
	ErrAccessToken = errors.New("dpop: ath is not the hash of the token presented")
	ErrReplay      = errors.New("dpop: proof already used")
	ErrRequest     = errors.New("dpop: bad request description")
	ErrOptions     = errors.New("dpop: bad options")
	// ErrReplayRecord wraps an error of the ReplayCache: the proof could
	// not be judged (a server answers 503, never a pass).
	ErrReplayRecord = errors.New("dpop: replay record failed")
	// ErrKey is returned by NewProver for a key it cannot sign proofs with.
	ErrKey = errors.New("dpop: key is neither Ed25519 nor ECDSA P-256")
	// ErrNoProver is returned by a Transport without a Prover.
	ErrNoProver = errors.New("dpop: Transport has no Prover")
)

// Typ is the JOSE header typ of a DPoP proof.
const Typ = "dpop+jwt"

// The headers that name the original request of a proof on a call that
// forwards it to another party to check: a resource server (the client
// module's Validator) or a gateway calling the issuer's GET
// /token/validate, which believes them only from its DPoP forwarders
// (SNOWTOKEN_DPOP_FORWARDERS). They are Traefik's ForwardAuth names;
// nginx and Envoy are configured to send the same. Proto, Host and URI
// (path and query) make the proof's htu, Method its htm.
const (
	HeaderForwardedMethod = "X-Forwarded-Method"
	HeaderForwardedProto  = "X-Forwarded-Proto"
	HeaderForwardedHost   = "X-Forwarded-Host"
	HeaderForwardedURI    = "X-Forwarded-Uri"
)

// MaxJTILength is the longest jti, in bytes, that Check accepts.
const MaxJTILength = 256

// Defaults of Options.
const (
	DefaultMaxLength = 8 << 10
	DefaultMaxAge    = 60 * time.Second
	DefaultSkew      = 5 * time.Second
)

// Options configure a Checker. Every zero value means its documented
// default.
type Options struct {
	// Algorithms are the alg values accepted, among "EdDSA" (Ed25519) and
	// "ES256" (P-256); empty means both. New refuses any other.
	Algorithms []string
	// MaxLength is the longest proof accepted, in bytes; zero means
	// DefaultMaxLength (8 KiB).
	MaxLength int
	// MaxAge is how long after its iat a proof is accepted; zero means
	// DefaultMaxAge (60 s). It is also how long its ID is kept for replay.
	MaxAge time.Duration
	// Skew is how far in the future an iat may be, for clocks that differ;
	// zero means DefaultSkew (5 s).
	Skew time.Duration
	// Nonce, if set, makes a nonce claim required: it reports whether the
	// nonce is one the server gave out and still accepts at now. Nil means
	// the server gives out no nonces, and a nonce claim is ignored.
	Nonce func(nonce string, now time.Time) bool
	// Replay records the IDs of accepted proofs; nil means a MemoryReplay of
	// the Checker's own on the system clock, which serves one process only.
	Replay ReplayCache
}

// Checker checks DPoP proofs. It is safe for concurrent use.
type Checker struct {
	algs      []string
	maxLength int
	maxAge    time.Duration
	skew      time.Duration
	nonce     func(string, time.Time) bool
	replay    ReplayCache

	mu      sync.Mutex
	headers map[string]*checkedHeader // by header segment; see header
}

// New returns a Checker with opts, or ErrOptions for an algorithm it does
// not support or a negative limit.
func New(opts Options) (*Checker, error) {
	c := &Checker{
		algs:      slices.Clone(opts.Algorithms),
		maxLength: opts.MaxLength,
		maxAge:    opts.MaxAge,
		skew:      opts.Skew,
		nonce:     opts.Nonce,
		replay:    opts.Replay,
		headers:   make(map[string]*checkedHeader),
	}
	if len(c.algs) == 0 {
		c.algs = []string{AlgEdDSA, AlgES256}
	}
	for _, a := range c.algs {
		if _, ok := keyTypes[a]; !ok {
			return nil, fmt.Errorf("%w: algorithm %q, want EdDSA or ES256", ErrOptions, a)
		}
	}
	if c.maxLength < 0 || c.maxAge < 0 || c.skew < 0 {
		return nil, fmt.Errorf("%w: negative MaxLength, MaxAge or Skew", ErrOptions)
	}
	if c.maxLength == 0 {
		c.maxLength = DefaultMaxLength
	}
	if c.maxAge == 0 {
		c.maxAge = DefaultMaxAge
	}
	if c.skew == 0 {
		c.skew = DefaultSkew
	}
	if c.replay == nil {
		c.replay = NewMemoryReplay()
	}
	return c, nil
}

// Algorithms returns the alg values the Checker accepts, for a server's
// metadata (dpop_signing_alg_values_supported) and its DPoP challenges.
func (c *Checker) Algorithms() []string { return slices.Clone(c.algs) }

// Request describes the HTTP request a proof came with.
type Request struct {
	// Method is the request's method, such as "POST".
	Method string
	// URL is the absolute URL the request was sent to, as the client saw
	// it (scheme and host of the server's public address, not of a proxy
	// behind it); its query and fragment are ignored.
	URL string
	// AccessToken is the access token the request presents, if any: then
	// the proof must carry its hash (ath).
	AccessToken string
}

// Proof is an accepted DPoP proof.
type Proof struct {
	// Algorithm is the proof's alg.
	Algorithm string
	// JWK is the public key that signed the proof.
	JWK JWK
	// Thumbprint is JWK's RFC 7638 thumbprint: the cnf.jkt of tokens bound
	// to the key.
	Thumbprint string
	// JTI, Method, URL (htu as sent), IssuedAt and Nonce are the proof's
	// claims.
	JTI      string
	Method   string
	URL      string
	IssuedAt time.Time
	Nonce    string
	// ID is what the replay record holds: the base64url SHA-256 of
	// Thumbprint, a space and JTI.
	ID string
	// Until is when the record of ID may go: IssuedAt + MaxAge.
	Until time.Time
}

// header is a proof's JOSE header. Members other than these are ignored, as
// RFC 7515 §4 asks, unless named in crit, which is refused.
type header struct {
	Typ  string         `json:"typ"`
	Alg  string         `json:"alg"`
	JWK  jsontext.Value `json:"jwk"`
	Crit jsontext.Value `json:"crit"`
}

// claims are a proof's claims, as Check reads them (others are ignored)
// and as a Prover writes them.
type claims struct {
	JTI   string   `json:"jti"`
	HTM   string   `json:"htm"`
	HTU   string   `json:"htu"`
	IAT   *float64 `json:"iat"`
	ATH   string   `json:"ath,omitempty"`
	Nonce string   `json:"nonce,omitempty"`
}

// Check checks proof, sent with req at now, as the package doc lists, and
// returns it once accepted and recorded for replay: Verify, then Record.
// An error of the ReplayCache is returned wrapped in ErrReplayRecord, not
// as a refusal.
func (c *Checker) Check(ctx context.Context, proof string, req Request, now time.Time) (*Proof, error) {
	p, err := c.Verify(proof, req, now)
	if err != nil {
		return nil, err
	}
	if err := c.Record(ctx, p, now); err != nil {
		return nil, err
	}
	return p, nil
}

// Verify makes every check of Check but the replay check, and records
// nothing: for a server that must check a proof before something else it
// may not undo (a client assertion's jti, which a use_dpop_nonce retry
// would send again) and Record it once that passed too. A proof Verify
// accepts counts only once Record has.
func (c *Checker) Verify(proof string, req Request, now time.Time) (*Proof, error) {
	return c.verify(proof, req, now)
}

// Record records p, a proof Verify accepted at now, against replay:
// ErrReplay if it was recorded before, at any checker sharing the
// ReplayCache; an error of the ReplayCache wrapped in ErrReplayRecord.
func (c *Checker) Record(ctx context.Context, p *Proof, now time.Time) error {
	seen, err := c.replay.Seen(ctx, p.ID, now, p.Until)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrReplayRecord, err)
	}
	if seen {
		return refuse(ErrReplay, "jti %.64q was used before: make a new proof, with a new jti, for each request", p.JTI)
	}
	return nil
}

// verify makes every check of Check but the replay check.
func (c *Checker) verify(proof string, req Request, now time.Time) (*Proof, error) {
	if len(proof) > c.maxLength {
		return nil, refuse(ErrProof, "%d bytes, more than the %d accepted", len(proof), c.maxLength)
	}
	parts, err := splitCompact(proof)
	if err != nil {
		return nil, err
	}
	h, cached, err := c.header(parts[0])
	if err != nil {
		return nil, err
	}
	if err := h.key.verify(h.alg, proof[:len(proof)-len(parts[2])-1], parts[2]); err != nil {
		return nil, err
	}
	if !cached {
		c.remember(parts[0], h)
	}
	var cl claims
	if err := strictUnmarshal(parts[1], partClaims, &cl); err != nil {
		return nil, refuse(ErrClaims, "%v", err)
	}
	for _, m := range [...]struct {
		name    string
		missing bool
	}{{"jti", cl.JTI == ""}, {"htm", cl.HTM == ""}, {"htu", cl.HTU == ""}, {"iat", cl.IAT == nil}} {
		if m.missing {
			return nil, refuse(ErrClaims, "claim %s is missing (jti, htm, htu and iat are required)", m.name)
		}
	}
	if len(cl.JTI) > MaxJTILength {
		return nil, refuse(ErrClaims, "claim jti is longer than %d bytes", MaxJTILength)
	}
	if cl.HTM != req.Method {
		return nil, refuse(ErrMethod, "htm is %.16q, not the request's method %s", cl.HTM, req.Method)
	}
	want, err := normalURL(req.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: URL %.200q: %w", ErrRequest, req.URL, err)
	}
	if got, err := normalURL(cl.HTU); err != nil || got != want {
		return nil, refuse(ErrURL, "htu is %.200q, not the request's URL %s", cl.HTU, want)
	}
	if c.nonce != nil && (cl.Nonce == "" || !c.nonce(cl.Nonce, now)) {
		return nil, refuse(ErrUseNonce, "it has no nonce or not the current one: send the one in the DPoP-Nonce header")
	}
	// A NumericDate may have a fraction (RFC 7519 §2): it counts from its
	// whole second. One outside 0 to 2^40 s is outside every window anyway.
	if *cl.IAT < 0 || *cl.IAT > 1<<40 {
		return nil, refuse(ErrIssuedAt, "iat %v is not a time since 1970 in seconds", *cl.IAT)
	}
	iat := time.Unix(int64(*cl.IAT), 0)
	switch at := iat.UTC().Format(time.RFC3339); {
	case iat.After(now.Add(c.skew)):
		return nil, refuse(ErrIssuedAt, "iat %s is more than %s after the server's time %s", at, c.skew, now.UTC().Format(time.RFC3339))
	case now.After(iat.Add(c.maxAge)):
		return nil, refuse(ErrIssuedAt, "iat %s is more than %s before the server's time %s: make a fresh proof", at, c.maxAge, now.UTC().Format(time.RFC3339))
	}
	switch {
	case req.AccessToken != "" && cl.ATH == "":
		return nil, refuse(ErrAccessToken, "claim ath is missing: a proof sent with an access token carries its hash")
	case req.AccessToken != "" && cl.ATH != AccessTokenHash(req.AccessToken):
		return nil, refuse(ErrAccessToken, "ath is not the hash of the access token presented")
	}
	thumb := h.thumb
	id := sha256.Sum256([]byte(thumb + " " + cl.JTI))
	return &Proof{
		Algorithm:  h.alg,
		JWK:        h.key,
		Thumbprint: thumb,
		JTI:        cl.JTI,
		Method:     cl.HTM,
		URL:        cl.HTU,
		IssuedAt:   iat,
		Nonce:      cl.Nonce,
		ID:         base64.RawURLEncoding.EncodeToString(id[:]),
		Until:      iat.Add(c.maxAge),
	}, nil
}

// AccessTokenHash returns the ath of a proof sent with token: the base64url
// SHA-256 of its ASCII bytes.
func AccessTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// splitCompact splits a JWS compact string into its three parts, checking
// that each holds only base64url characters: the decoder would skip CR and
// LF, and a JWS holds neither.
func splitCompact(s string) ([3]string, error) {
	var parts [3]string
	n := 0
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if !isBase64URL(s[i]) {
				return parts, refuse(ErrProof, "not a JWS in compact form: byte %#x at %d is not base64url", s[i], i)
			}
			continue
		}
		if n == len(parts) {
			return parts, refuse(ErrProof, "not a JWS in compact form: more than three parts")
		}
		parts[n] = s[start:i]
		n++
		start = i + 1
	}
	if n != len(parts) || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return parts, refuse(ErrProof, "not a JWS in compact form: three non-empty base64url parts joined by dots")
	}
	return parts, nil
}

func isBase64URL(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || '0' <= b && b <= '9' || b == '-' || b == '_'
}

// strictUnmarshal decodes seg, the base64url of part holding one JSON
// object, into v: names match exactly and appear once, types match,
// nothing follows. Its error says what is wrong in the protocol's words
// (jsonReason).
func strictUnmarshal(seg string, part jsonPart, v any) error {
	data, err := jwk.DecodeBase64URL(seg)
	if err != nil {
		return errors.New(part.name + " is not base64url")
	}
	if len(data) == 0 || data[0] != '{' {
		return errors.New(part.name + " is not a JSON object")
	}
	if err := jsonv2.Unmarshal(data, v); err != nil {
		return errors.New(jsonReason(part, err))
	}
	return nil
}
