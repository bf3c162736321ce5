package handlers

import (
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// auth is who may call a route, as the route table declares it and route
// enforces it (authenticate):
//
//	authNone    anyone: public metadata, health, and GET /token/validate,
//	            whose token is checked by the verdict, not as a caller
//	authClient  a client of the form's endpoints (issue, introspection,
//	            revocation): HTTP Basic, the form's secret or a client
//	            assertion (formClient), behind the failed-authentication limit
//	authAdmin   an admin client, by HTTP Basic (adminClient)
//	authFeed    a client that may follow the revocation feed, by HTTP Basic,
//	            where the feed is served (feedClient)
type auth uint8

// The callers of routes.
const (
	authNone auth = iota
	authClient
	authAdmin
	authFeed
)

// String is the caller's name as the route table's tests read it.
func (a auth) String() string {
	switch a {
	case authClient:
		return "client"
	case authAdmin:
		return "admin"
	case authFeed:
		return "feed"
	}
	return "none"
}

// call is a request as its handler sees it: the set in force when it
// began, and the caller route authenticated. It is passed by value: a
// request costs no allocation for it.
type call struct {
	*set
	// client is the authenticated caller (authClient, authAdmin); nil on
	// an authNone route, and on an authFeed route, whose caller is feed.
	client *clients.Client
	// form is an authClient route's form.
	form url.Values
	// proof is the DPoP proof POST /token came with, checked (but not yet
	// recorded against replay) before its client authenticated.
	proof *dpop.Proof
	// feed is the caller's standing on the revocation feed (authFeed).
	feed *feedStanding
}

// authenticate authenticates the caller of a request to rt as rt.auth
// declares, into cl; its error is the request's answer. The order of
// every check is the route's own of before: a client route reads its form
// first (then its DPoP proof, rt.proofFirst), an admin route refuses a client that is not
// an admin after it authenticates, with the audit event admin.refused, a
// feed route answers 404 where no feed is served before it looks at a
// credential.
func (s *Server) authenticate(c *gin.Context, rt *routeEntry, cl *call) error {
	var err error
	switch rt.auth {
	case authClient:
		if cl.form, err = s.form(c); err != nil {
			return err
		}
		if rt.proofFirst {
			if cl.proof, err = s.issueProof(c, cl.set); err != nil {
				return err
			}
		}
		cl.client, err = s.formClient(c, cl.set, cl.form)
	case authAdmin:
		cl.client, err = s.adminClient(c, cl.set, rt.forbidden)
	case authFeed:
		cl.feed, err = s.feedClient(c, cl.set)
	}
	return err
}

// adminClient authenticates an admin client, by HTTP Basic (there is no
// body): a client that is not an admin is told forbidden (ErrForbidden),
// and the refusal is audited.
func (s *Server) adminClient(c *gin.Context, st *set, forbidden string) (*clients.Client, error) {
	client, err := s.basicClient(c, st)
	if err != nil {
		return nil, err
	}
	if !client.Admin {
		s.audit(c, "admin.refused", "refused an admin request from a client that is not an admin", "client_id", client.ID, "route", c.FullPath())
		return nil, refusal.New(token.ErrForbidden, "%s", forbidden)
	}
	return client, nil
}
