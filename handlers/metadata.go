package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// jwksCacheControl lets consumers cache the JWKS for keyset.JWKSMaxAge, which
// a key is published for (with the time every replica takes to load it)
// before it signs.
var jwksCacheControl = "public, max-age=" + strconv.Itoa(int(keyset.JWKSMaxAge/time.Second))

func (s *Server) jwks(c *gin.Context, cl call) {
	c.Header("Cache-Control", jwksCacheControl)
	c.JSON(http.StatusOK, cl.svc.JWKS())
}

func (s *Server) metadata(c *gin.Context, cl call) {
	b := s.opts.BaseURL
	m := gin.H{
		"issuer":                   cl.svc.Options().Issuer,
		"token_endpoint":           b + "/token",
		"jwks_uri":                 b + "/.well-known/jwks.json",
		"introspection_endpoint":   b + "/token/introspect",
		"revocation_endpoint":      b + "/token/revoke",
		"grant_types_supported":    []string{grantClientCredentials, GrantTokenExchange},
		"response_types_supported": []string{},
	}
	// The client authentication methods of the endpoints with a form:
	// private_key_jwt and its algorithms where assertions are checked
	// (Options.Assertions).
	methods := []string{clients.AuthSecretBasic, clients.AuthSecretPost}
	if s.assertions != nil {
		methods = clients.AuthMethods
		for _, e := range []string{"token", "introspection", "revocation"} {
			m[e+"_endpoint_auth_signing_alg_values_supported"] = clientauth.Algorithms
		}
	}
	for _, e := range []string{"token", "introspection", "revocation"} {
		m[e+"_endpoint_auth_methods_supported"] = methods
	}
	m["dpop_signing_alg_values_supported"] = s.dpop.Algorithms() // RFC 9449 §5.1
	// snowtoken's own member: the aud of the Transaction Tokens GET
	// /token/validate?txn_token=1 mints (txn.go), which a service's
	// client.TxnVerifier checks; absent while they are off.
	if s.opts.Txn != nil {
		m["txn_token_trust_domain"] = s.opts.Txn.TrustDomain()
	}
	c.JSON(http.StatusOK, m)
}

func (s *Server) decodeID(c *gin.Context, cl call) {
	id, err := snowflakealg.ParseID(c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.ids.Decompose(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

func (s *Server) healthz(c *gin.Context, cl call) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// configState is /readyz's config: the set in force, and the sources on
// disk that were refused.
type configState struct {
	Version
	Refused map[string]Refusal `json:"refused,omitempty"`
}

func (s *Server) ready(c *gin.Context, cl call) {
	if s.opts.Draining != nil && s.opts.Draining() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": "shutting down"})
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.opts.ReadyTimeout)
	defer cancel()
	// Every reason at once, so that an operator fixes them in one go.
	var reasons []string
	notReady := func(reason string, err error) {
		reasons = append(reasons, reason)
		s.log.Warn("not ready", "err", err)
	}
	if err := cl.svc.Ready(ctx); err != nil {
		notReady("redis does not accept writes: "+redisReason(err), err)
	} else if s.opts.Ready != nil {
		if err := s.opts.Ready(ctx); err != nil {
			notReady(err.Error(), err)
		}
	}
	if err := s.ids.Health(); err != nil {
		notReady(err.Error(), err)
	}
	config := configState{Version: cl.version}
	if s.opts.Refused != nil {
		config.Refused = s.opts.Refused()
	}
	if len(reasons) > 0 {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "reason": strings.Join(reasons, "; "), "config": config})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "config": config})
}

// redisReason is what /readyz shows of a Redis failure: the error Redis
// answered (OOM, READONLY, MISCONF, a NOAUTH), which names the state an
// operator must fix, or that it does not answer. Addresses and the rest of
// the chain stay in the log.
func redisReason(err error) string {
	var re redis.Error
	if errors.As(err, &re) {
		msg := re.Error()
		if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
			msg = msg[:i]
		}
		return msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer in time"
	}
	return "no answer"
}
