package token

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/syntax"
)

// Claims are the claims of a snowtoken access token; decoding them checks
// the type of every date (see jwtpolicy.Claims).
type Claims = jwtpolicy.Claims

// IDs issues and decodes Snowflake IDs; *snowflakealg.SnowFlakeAlg is one.
type IDs interface {
	NextID(ctx context.Context) (snowflakealg.ID, error)
	Decompose(id snowflakealg.ID) (snowflakealg.Parts, error)
}

// Options configures a Service. Zero values mean the documented defaults.
type Options struct {
	// Issuer is the iss of every token and the only one accepted. Required.
	Issuer string
	// Audience, if set, is the aud of the tokens of clients that list no
	// Audiences, and the one audience they may ask for (see checkClient).
	// It must be 1 to MaxAudienceLen bytes of printable ASCII other than
	// space, double quote and backslash.
	Audience string
	// TTL is the lifetime of a token when the client does not ask. Zero means DefaultTTL.
	TTL time.Duration
	// MaxTTL caps every lifetime. Zero means DefaultMaxTTL.
	MaxTTL time.Duration
	// Leeway allows for clock skew on exp and iat. Zero means DefaultLeeway;
	// NoLeeway means none; any other negative is an error.
	Leeway time.Duration
	// CacheSize is how many verified tokens Verdict remembers. Zero means
	// DefaultCacheSize; CacheOff turns the cache off; any other negative is
	// an error.
	CacheSize int
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Revocations, if set, decides on tokens from the revocation log, in
	// memory (see Revocations): a token it says is live is accepted with no
	// Redis command, one it says is revoked refused with none; when it
	// cannot tell, Verdict reads Redis as without it, and records the
	// answer with the verified token, so that the next validation of the
	// same token may be decided from memory. Opaque tokens are then cached
	// too (their claims, from their record). Nil means every validation
	// reads Redis.
	Revocations Revocations

	// resolved: these are Resolved's answer, which NewService takes as it
	// is (resolving again would turn NoLeeway, resolved as zero, into the
	// default).
	resolved bool
}

// Service issues, validates and revokes tokens.
type Service struct {
	keys *keyset.Set
	// byHeader is the keys' members by the header segment of their tokens
	// (headerSegment), for parseOwn.
	byHeader map[string]*keyset.Member
	store    Store
	ids      IDs
	opts     Options
	// full checks everything a token must pass but its session; sigOnly
	// the signature and algorithm only, for Revoke.
	full, sigOnly policy
	cache         *verifiedCache
	signer        *signer
	// defaultAud is Options.Audience as a list: what a client that lists
	// no audiences may ask for.
	defaultAud []string
	// stats counts how validations were decided, for every service that
	// WithKeys makes from this one.
	stats *logCounters
}

// Resolved returns o as a Service runs with it, the one place of its
// defaults: every zero option its default, NoLeeway as no leeway (zero),
// CacheOff kept; ErrOptions for another negative option or a TTL out of
// bounds. A composition root reads it to size the Store for the service
// (LogRetention of MaxTTL and Leeway, and Leeway) before making either.
func (o Options) Resolved() (Options, error) {
	if o.resolved {
		return o, nil
	}
	if o.CacheSize < 0 && o.CacheSize != CacheOff || o.Leeway < 0 && o.Leeway != NoLeeway {
		return Options{}, fmt.Errorf("%w: a negative CacheSize or Leeway other than CacheOff or NoLeeway", ErrOptions)
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.Leeway == 0 {
		o.Leeway = DefaultLeeway
	}
	o.Leeway = max(o.Leeway, 0)
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TTL < time.Second || o.MaxTTL < o.TTL {
		return Options{}, fmt.Errorf("%w: want 1s <= ttl (%v) <= max ttl (%v)", ErrOptions, o.TTL, o.MaxTTL)
	}
	o.resolved = true
	return o, nil
}

// NewService returns a service that signs with keys, keeps sessions in store
// and takes token IDs from ids.
func NewService(keys *keyset.Set, store Store, ids IDs, opts Options) (*Service, error) {
	if opts.Issuer == "" {
		return nil, fmt.Errorf("%w: an issuer is required", ErrOptions)
	}
	opts, err := opts.Resolved()
	if err != nil {
		return nil, err
	}
	if need := LogRetention(opts.MaxTTL, opts.Leeway); store != nil && store.LogRetention() < need {
		return nil, fmt.Errorf("%w: the store's log retention %v is shorter than max ttl (%v) and three leeways (%v): see LogRetention",
			ErrOptions, store.LogRetention(), opts.MaxTTL, need)
	}
	if store != nil && store.Leeway() < opts.Leeway {
		return nil, fmt.Errorf("%w: the store's leeway %v is shorter than the service's (%v): see Store.Leeway",
			ErrOptions, store.Leeway(), opts.Leeway)
	}
	var defaultAud []string
	if opts.Audience != "" {
		if err := syntax.CheckAudience(opts.Audience); err != nil {
			return nil, fmt.Errorf("%w: audience %.64q: %w", ErrOptions, opts.Audience, err)
		}
		defaultAud = []string{opts.Audience}
	}
	s := &Service{
		store: store, ids: ids, opts: opts, defaultAud: defaultAud, stats: &logCounters{},
		// No audience here: which are good depends on the client (checkClient).
		full: newPolicy(true, jwtpolicy.ParserOptions(opts.Issuer, "", opts.Leeway, opts.Now)...),
		sigOnly: newPolicy(false, jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding()),
	}
	return s.WithKeys(keys)
}

// WithKeys returns a service like s that signs and verifies with keys, for
// a reload: s itself is unchanged, so the requests that started with it
// finish with its keys. The new service shares the session store and the
// ID generator; its verified-token cache starts empty, so that a token
// verified by a key that keys no longer holds is not taken from it.
func (s *Service) WithKeys(keys *keyset.Set) (*Service, error) {
	sg, err := newSigner(keys.Signer(), s.opts.Issuer)
	if err != nil {
		return nil, err
	}
	byHeader := make(map[string]*keyset.Member)
	for _, k := range keys.Members() {
		header, err := headerSegment(k.ID)
		if err != nil {
			return nil, fmt.Errorf("%w: key %s: %w", ErrKey, k.ID, err)
		}
		byHeader[header] = k
	}
	n := *s
	n.keys, n.byHeader, n.signer, n.cache = keys, byHeader, sg, newVerifiedCache(s.opts.CacheSize)
	return &n, nil
}

// Keys returns the key set the service signs and verifies with.
func (s *Service) Keys() *keyset.Set { return s.keys }

// JWKS returns the public keys that verify now: the key set's, less the
// retired keys whose tokens have all expired (verifies).
func (s *Service) JWKS() keyset.JWKS {
	now := s.opts.Now()
	return s.keys.JWKSOf(func(k *keyset.Member) bool { return s.verifies(k, now) })
}

// verifies reports whether k still verifies at now. A retired key verifies
// until every token it signed has expired: the longest lifetime (MaxTTL)
// and the leeway after it stopped signing, plus keyset.Propagation, since a
// replica that has not yet loaded the new set still signs with it. Other
// keys verify as long as they are in the set. (A token verified before its
// key was dropped stays in the verified-token cache until its own exp, which
// for a token of this issuer comes before the drop.)
func (s *Service) verifies(k *keyset.Member, now time.Time) bool {
	return k.Retired.IsZero() || now.Before(k.Retired.Add(keyset.Propagation+s.opts.MaxTTL+s.opts.Leeway))
}

// Options returns the options in force, defaults filled in.
func (s *Service) Options() Options { return s.opts }

// Ready checks that the session store answers and accepts writes.
func (s *Service) Ready(ctx context.Context) error { return s.store.Ready(ctx) }

// IssueRequest is what a client asks for. Zero values mean: all of the
// client's scopes, the client itself as subject, the default lifetime, the
// client's default audience.
type IssueRequest struct {
	Scope     string        // space-separated, a subset of the client's
	Subject   string        // only for clients that may set it
	ExpiresIn time.Duration // capped by the client's and the global maximum
	// Resource and Audience are the values of the resource (RFC 8707) and
	// audience parameters, each among the client's audiences; see audience.go.
	Resource, Audience []string
	// JKT, if set, binds the token to the DPoP key of that RFC 7638
	// thumbprint (RFC 9449 §6): its cnf.jkt, or its opaque record's. The
	// caller has checked the proof of possession of the key.
	JKT string
}

// Issued is a new token.
type Issued struct {
	AccessToken string
	ExpiresIn   time.Duration
	Scope       string
	ID          snowflakealg.ID
	JKT         string // the DPoP key the token is bound to, if any
}

// Issue creates a token for client c: a new ID, a signed JWT (or an opaque
// token, for a client whose TokenFormat is FormatOpaque), and its session
// record in Redis. Nothing is returned unless the record is stored.
func (s *Service) Issue(ctx context.Context, c *clients.Client, req IssueRequest) (Issued, error) {
	scopes, err := syntax.ParseScope(req.Scope)
	if err != nil {
		return Issued{}, err
	}
	if len(scopes) == 0 {
		scopes = c.Scopes
	} else if !c.HasScopes(scopes) {
		return Issued{}, refusal.New(ErrInvalidScope, "client %q may not ask for %.64q", c.ID, strings.Join(syntax.Missing(c.Scopes, scopes), " "))
	}
	subject := c.ID
	if req.Subject != "" && req.Subject != c.ID {
		if !c.MaySetSubject {
			return Issued{}, refusal.New(ErrInvalidRequest, "this client may not set the subject")
		}
		if err := syntax.CheckName(req.Subject); err != nil {
			return Issued{}, refusal.New(ErrInvalidRequest, "subject: %w", err)
		}
		subject = req.Subject
	}
	aud, err := s.audiences(c, req)
	if err != nil {
		return Issued{}, err
	}
	if err := checkKey(c, req.JKT); err != nil {
		return Issued{}, err
	}
	ttl, err := s.lifetime(c, req.ExpiresIn)
	if err != nil {
		return Issued{}, err
	}
	g := &grant{sub: subject, client: c.ID, scope: strings.Join(scopes, " "), aud: aud, jkt: req.JKT}
	return s.mint(ctx, c, g, ttl, time.Time{})
}

// validate checks a token: signature (EdDSA, one of our kids), typ, iss, exp
// and iat, then its session and its parents' (parents.go): what
// Options.Revocations says of them, and when it cannot tell (or there is
// none) their session records in Redis; an opaque
// token, its secret against its record (validateOpaque). It is Verdict's
// first step and unexported: a token it passes may still be one of a
// disabled client, or for another audience (checkClient). Any
// failure of the token wraps ErrInvalidToken (and ErrRevoked when its
// session is gone or the log revokes it); a Redis failure is
// ErrUnavailable, never a pass. The result is shared with later validations
// of the same token.
func (s *Service) validate(ctx context.Context, raw string) (*Verified, error) {
	if isOpaque(raw) {
		return s.validateOpaque(ctx, raw)
	}
	now := s.opts.Now()
	v, err := s.verify(raw, now)
	if err != nil {
		return nil, err
	}
	m, done, err := s.fromLog(v, now)
	switch {
	case done && err != nil:
		return nil, err
	case done:
		return v, nil
	}
	err = s.sessionLive(ctx, v) // and its parents'
	s.checked(v, m, err)
	if err != nil {
		if errors.Is(err, ErrRevoked) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
		}
		return nil, err
	}
	return v, nil
}

// verify checks everything but the session, through the cache.
func (s *Service) verify(raw string, now time.Time) (*Verified, error) {
	sum, v, err := s.cached(raw, now)
	if v != nil || err != nil {
		return v, err
	}
	claims, id, err := s.parse(s.full, raw)
	if err != nil {
		return nil, err
	}
	parts, err := s.ids.Decompose(id)
	if err != nil {
		return nil, refusal.New(ErrInvalidToken, "jti: %w", err)
	}
	scopes, err := syntax.ParseScope(claims.Scope)
	if err != nil {
		return nil, refusal.New(ErrInvalidToken, "scope: %w", err)
	}
	session := s.store.Handle(SessionRef{JTI: claims.ID, Subject: claims.Subject, Client: claims.ClientID, Issued: parts.Time})
	lin, err := s.lineageOf(claims, session)
	if err != nil {
		return nil, err
	}
	v = &Verified{
		claims: *claims, id: id, parts: parts, scopes: scopes, session: session, lineage: lin,
		cacheUntil: claims.ExpiresAt.Add(s.opts.Leeway),
	}
	s.cache.put(&sum, v, now)
	return v, nil
}

// cached returns raw's cache key and its verified token if the cache holds
// it (nil if not), or checkSyntax's error for a token too long to read or
// not spelled as a token of ours. The cache is keyed by the SHA-256 of the
// exact string and holds only tokens that passed checkSyntax, so a hit is a
// string that passed it already: the length bound alone comes before the
// hash (it bounds the hash's work), the rest of the syntax only on a miss,
// before anything else reads the token (0.18 of 14.3 CPU-seconds of a hot
// validation under wrk went to it on every hit).
func (s *Service) cached(raw string, now time.Time) (sum [sha256.Size]byte, v *Verified, err error) {
	if len(raw) > MaxTokenLen {
		return sum, nil, errTooLong
	}
	sum = sha256.Sum256(bytesOf(raw)) // no copy of the token
	if v = s.cache.get(&sum, now); v != nil {
		return sum, v, nil
	}
	return sum, nil, checkSyntax(raw)
}

// parse checks raw with p (the whole policy, or the signature alone), then
// its typ, that its subject and client are names as Issue writes them (they
// become Redis keys and headers), and that its jti is a Snowflake ID.
func (s *Service) parse(p policy, raw string) (*Claims, snowflakealg.ID, error) {
	var claims Claims
	var t *jwt.Token
	own, err := s.parseOwn(p, raw, &claims)
	if !own {
		t, err = p.parser.ParseWithClaims(raw, &claims, s.keyFor)
	}
	if errors.Is(err, jwt.ErrTokenInvalidIssuer) {
		// Expected and received in the log only (the HTTP layer logs the
		// chain at debug): a client is told what went wrong, not our issuer.
		err = fmt.Errorf("%w: got %.64q, want %q", err, claims.Issuer, s.opts.Issuer)
	}
	if err != nil {
		return nil, 0, refusal.Describe(fmt.Errorf("%w: %w", ErrInvalidToken, err), jwtReason(err))
	}
	if !own { // parseOwn's header is ours: its typ is jwtpolicy.Type
		if err := jwtpolicy.CheckType(t); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrInvalidToken, err)
		}
	}
	if err := syntax.CheckName(claims.Subject); err != nil {
		return nil, 0, refusal.New(ErrInvalidToken, "sub: %w", err)
	}
	if err := syntax.CheckName(claims.ClientID); err != nil {
		return nil, 0, refusal.New(ErrInvalidToken, "client_id: %w", err)
	}
	id, err := snowflakealg.ParseID(claims.ID)
	if err != nil {
		return nil, 0, refusal.New(ErrInvalidToken, "jti: %w", err)
	}
	return &claims, id, nil
}

// jwtReason is what a client is told of a token golang-jwt refused: its
// errors' texts ("token has invalid claims: token is expired") are a
// library's chain, not a description.
func jwtReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "issuer mismatch: the token was issued by another issuer (iss)"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "audience mismatch: the token is not for this audience (aud)"
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, errDroppedKid):
		return "the token has expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "the token is not yet valid: its iat or nbf is in the future"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwtpolicy.ErrNoIAT):
		return "the token lacks a required claim"
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "the token is not a well-formed JWT"
	case errors.Is(err, errUnknownKid):
		return "the token is signed with a key this issuer does not hold"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return "the token's signature or algorithm is not valid"
	default:
		return "the token's claims are not valid"
	}
}

// keyFor's errors: a kid the key set does not hold (a key rollout in
// progress, or not our token), and a retired key dropped once every token
// it signed had expired (so the token has expired too): one past its time
// here, or one the keys directory keeps a tombstone of.
var (
	errUnknownKid = errors.New("token: unknown kid")
	errDroppedKid = errors.New("token: the key was retired and every token it signed has expired")
)

// VerifyingKey returns the public key kid names if it verifies this
// service's signatures now (the rule keyFor holds a JWT's kid to): for a
// Transaction Token this issuer signed, presented back to it.
func (s *Service) VerifyingKey(kid string) (ed25519.PublicKey, error) {
	k, ok := s.keys.Lookup(kid)
	if !ok || !s.verifies(k, s.opts.Now()) {
		return nil, fmt.Errorf("%w %.32q", errUnknownKid, kid)
	}
	return k.Public, nil
}

func (s *Service) keyFor(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k, ok := s.keys.Lookup(kid)
	switch {
	case !ok && s.keys.Dropped(kid):
		return nil, errDroppedKid
	case !ok:
		return nil, fmt.Errorf("%w %.32q", errUnknownKid, kid)
	case !s.verifies(k, s.opts.Now()):
		return nil, errDroppedKid
	}
	return k.Public, nil
}
