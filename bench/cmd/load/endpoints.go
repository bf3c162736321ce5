package main

// servers is what the run loads and measures.
type servers struct {
	issuerURL, bareURL           string
	basic, opaqueBasic           string // Authorization of the JWT client and of the opaque one
	issuerPid, barePid, redisPid int
	// bareRedis is the bare handler reading one Redis key per request with
	// plain go-redis (cmd/bare -redis); empty skips its row.
	bareRedisURL string
	bareRedisPid int
	redisPort    int
	usedEmpty    int64 // Redis used_memory before any session
	// assertionKey is the private_key_jwt client's key (assertion.go).
	assertionKey *proofKey
	// peer is the go-oauth2 peer (peer.go); nil skips its rows.
	peer *peer
	// consumerURL is the consumer (cmd/consumer: the bare handler behind
	// client.Validator in remote mode); empty skips the consumer's paths.
	consumerURL string
	consumerPid int
}

// endpoint is one request, sent again and again to one server, that both
// the wrk table and the constant-rate table measure.
type endpoint struct {
	name       string
	url        string // the server's
	req        httpReq
	pid, redis int // of the server, and of Redis if the server uses it (else 0)
	floor      string
	target     float64 // the target: the bound on server CPU/req ÷ floor (0: none)
	cmdsTarget float64 // the bound on Redis commands per request (0: none)
	// fresh, if set, puts a value of its own in each request: a DPoP proof
	// (dpop.go), a client assertion (assertion.go).
	fresh *freshSource
	// profile: under -pprof, take the issuer's CPU profile during the row's
	// last wrk round, as of some fresh rows (freshSource.profile).
	profile bool
}

// hotCommands is the bound on Redis commands per hot validation, heartbeats
// and lease renewals amortised: replicas validate from memory while their
// revocation log is fresh.
const hotCommands = 0.01

// jwtIssueName is the secret-based JWT issue row's name: the
// private_key_jwt row's floor counts its server CPU per request.
const jwtIssueName = "POST /token (JWT)"

// Indexes among endpoints of the rows a never-seen row follows
// (neverSeenRows): hot JWT validation, and the exchange of a cached
// subject JWT.
const (
	hotJWT         = 2
	cachedExchange = 6
)

// endpoints are the rows of both tables, the bare handler first, with
// their targets (BENCHMARKS.md); each validation and introspection uses one token
// issued now, again and again (hot).
func (s servers) endpoints() ([]endpoint, error) {
	hotToken, err := issue(s.issuerURL, s.basic)
	if err != nil {
		return nil, err
	}
	opaqueHot, err := issue(s.issuerURL, s.opaqueBasic)
	if err != nil {
		return nil, err
	}
	issuer := func(name string, req httpReq, floor string, target float64) endpoint {
		return endpoint{name: name, url: s.issuerURL, req: req, pid: s.issuerPid, redis: s.redisPid, floor: floor, target: target}
	}
	hot := func(e endpoint) endpoint { e.cmdsTarget = hotCommands; return e }
	// The secret-based JWT issue, profiled under -pprof beside the
	// private_key_jwt issue that its figures are the floor of.
	secretIssue := issuer(jwtIssueName, issueRequest(s.basic), floorSign, 1.4)
	secretIssue.profile = true
	eps := []endpoint{
		{name: "bare net/http, fixed JSON", url: s.bareURL, req: bareRequest, pid: s.barePid, floor: floorBare},
		secretIssue,
		hotJWT: hot(issuer("GET /token/validate, hot (same JWT)", validateRequest(hotToken), floorBare, 1.6)),
		issuer("POST /token/introspect (JWT)", introspectRequest(s.basic, hotToken), floorBare, 0),
		issuer("POST /token (opaque)", issueRequest(s.opaqueBasic), floorBare, 1.5),
		hot(issuer("GET /token/validate, hot (same opaque token)", validateRequest(opaqueHot), floorBare, 1.6)),
		// Identity through the call chain: an exchange of the same (cached)
		// subject token for a narrower one, one signature a request, an
		// issue's work and so an issue's target (the never-seen exchange
		// follows it: neverSeenRows); a hot validation that mints a
		// Transaction Token, one signature.
		cachedExchange: issuer("POST /token, token exchange (same subject JWT)", exchangeRequest(s.basic, hotToken), floorSign, 1.4),
		hot(issuer("GET /token/validate?txn_token=1, hot JWT, mints a Txn-Token", bearerRequest("/token/validate?txn_token=1", hotToken), floorSign, 1.3)),
	}
	dpopEps, err := s.dpopEndpoints(neverSeenName, jwtIssueName)
	if err != nil {
		return nil, err
	}
	eps = append(eps, dpopEps...)
	keyed, err := s.assertionEndpoint(s.assertionKey, jwtIssueName)
	if err != nil {
		return nil, err
	}
	eps = append(eps, keyed)
	if s.bareRedisURL != "" {
		// Not a floor the targets use (Redis's CPU is apart, as in every
		// row), but what one plain round trip costs a net/http handler: the
		// goroutine parked and woken, net/http's background read of a
		// connection whose handler waits, go-redis's own work.
		eps = append(eps, endpoint{name: "bare net/http + one Redis GET (plain go-redis)", url: s.bareRedisURL, req: bareRequest,
			pid: s.bareRedisPid, redis: s.redisPid, floor: floorBare})
	}
	if s.peer != nil {
		peerHot, err := issue(s.peer.url, s.peer.basic)
		if err != nil {
			return nil, err
		}
		peer := func(name string, req httpReq, floor string) endpoint {
			return endpoint{name: peerPrefix + name, url: s.peer.url, req: req, pid: s.peer.cmd.Process.Pid, redis: s.redisPid, floor: floor}
		}
		eps = append(eps,
			peer("POST /token ("+peerAlg+" JWT)", issueRequest(s.peer.basic), floorSign),
			peer("GET /validate, hot (same token)", bearerRequest("/validate", peerHot), floorBare))
	}
	return eps, nil
}
