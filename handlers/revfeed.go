package handlers

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// feedClient authenticates a client of the revocation feed (HTTP Basic), in
// the clients of cur, for the feed routes (authFeed, authenticate), and
// checks that it may follow it (mayFollow). The feed must be served
// (Options.Feed), else ErrNotFound, before any credential is looked at. It
// returns the client as the feed's registry keeps a stream or a waiting
// poll of it (feedSubscriber).
func (s *Server) feedClient(c *gin.Context, cur *set) (*feedStanding, error) {
	if s.feed == nil {
		return nil, refusal.New(ErrNotFound, "no revocation feed here")
	}
	id, secret, err := basicCredentials(c)
	if err != nil {
		return nil, err
	}
	client, err := s.authenticateClient(c, cur, id, secret, "")
	if err != nil {
		return nil, err
	}
	if err := mayFollow(client); err != nil {
		s.audit(c, "feed.refused", "refused the revocation feed to a client without revocation_feed", "client_id", client.ID, "route", c.FullPath())
		return nil, err
	}
	return &feedStanding{s: s, clients: cur.clients, id: client.ID, secret: secret, until: client.SecretExpiry(secret)}, nil
}

// mayFollow refuses a client that may not follow the revocation feed
// (clients.Client.MayFollowRevocations).
func mayFollow(client *clients.Client) error {
	if !client.MayFollowRevocations() {
		return refusal.New(token.ErrForbidden, "the client may not follow the revocation feed (revocation_feed)")
	}
	return nil
}

// feedStanding is what a stream or a poll of the feed asks, at every
// reload of the clients (Swap, revfeed.Feed.Recheck), to learn whether its
// client may still follow the feed: the client is authenticated again,
// with the secret it sent, against the clients in force (it exists, is
// enabled, the secret still authenticates it: not rotated away nor
// expired) and must still hold revocation_feed or admin. While the clients
// it authenticated against are in force and its secret has not expired,
// the answer stands without a hash: a stream's join costs a comparison.
type feedStanding struct {
	s       *Server
	clients *clients.Registry // those it authenticated against
	id      string
	secret  string    // held as long as the request holds it; never logged
	until   time.Time // when the secret stops authenticating; zero: never
	cut     atomic.Pointer[error]
}

// subscriber is the client as revfeed's registry keeps it.
func (st *feedStanding) subscriber() revfeed.Subscriber {
	return revfeed.Subscriber{Client: st.id, Standing: st.standing}
}

// standing is revfeed.Subscriber.Standing.
func (st *feedStanding) standing() (time.Time, error) {
	cur := st.s.set.Load()
	now := st.s.now()
	if cur.clients == st.clients && (st.until.IsZero() || now.Before(st.until)) {
		return st.until, nil
	}
	client, err := cur.clients.Authenticate(st.id, st.secret, now)
	if err == nil {
		err = mayFollow(client)
	}
	if err != nil {
		st.cut.CompareAndSwap(nil, &err)
		return time.Time{}, err
	}
	return client.SecretExpiry(st.secret), nil
}

// audit logs feed.cut_off if the client's standing ended its stream or
// poll.
func (st *feedStanding) audit(c *gin.Context) {
	if err := st.cut.Load(); err != nil {
		st.s.audit(c, "feed.cut_off", "ended a stream or poll of the revocation feed: the client may no longer follow it",
			"client_id", st.id, "route", c.FullPath(), "reason", answerFor(*err).told(*err))
	}
}

// revocationEvents serves GET /revocations/events (revfeed.Feed.Events).
func (s *Server) revocationEvents(c *gin.Context, cl call) {
	st := cl.feed
	defer st.audit(c)
	if err := s.feed.Events(c.Writer, c.Request, st.subscriber()); err != nil {
		s.fail(c, err)
	}
}

// revocationSnapshot serves GET /revocations (revfeed.Feed.Snapshot).
func (s *Server) revocationSnapshot(c *gin.Context, cl call) {
	st := cl.feed
	if err := s.feed.Snapshot(c.Writer, c.Request, st.id); err != nil {
		s.fail(c, err)
	}
}

// revocationPoll serves POST /revocations/poll (revfeed.Feed.Poll): an RFC
// 8936 poll, application/json, bounded by MaxBodyBytes.
func (s *Server) revocationPoll(c *gin.Context, cl call) {
	st := cl.feed
	defer st.audit(c)
	req := c.Request
	if ct := req.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		s.fail(c, refusal.New(token.ErrInvalidRequest, "content type must be application/json (RFC 8936 §2.4)"))
		return
	}
	if req.URL.RawQuery != "" {
		s.fail(c, refusal.New(token.ErrInvalidRequest, "parameters belong in the body, not the URL"))
		return
	}
	body := http.MaxBytesReader(c.Writer, req.Body, s.opts.MaxBodyBytes)
	if err := s.feed.Poll(c.Writer, req, body, st.subscriber()); err != nil {
		s.fail(c, err)
	}
}
