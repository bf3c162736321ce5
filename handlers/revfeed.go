package handlers

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/token"
)

// feedClient authenticates a client of the revocation feed (HTTP Basic) and
// checks that it may follow it (token.Client.MayFollowRevocations). The feed
// must be served (Options.Feed), else ErrNotFound, before any credential is
// looked at.
func (s *Server) feedClient(c *gin.Context) (*token.Client, error) {
	if s.feed == nil {
		return nil, fmt.Errorf("%w: no revocation feed here", ErrNotFound)
	}
	client, err := s.basicClient(c)
	if err != nil {
		return nil, err
	}
	if !client.MayFollowRevocations() {
		s.audit(c, "feed.refused", "refused the revocation feed to a client without revocation_feed", "client_id", client.ID, "route", c.FullPath())
		return nil, fmt.Errorf("%w: the client may not follow the revocation feed (revocation_feed)", token.ErrForbidden)
	}
	return client, nil
}

// revocationEvents serves GET /revocations/events (revfeed.Feed.Events).
func (s *Server) revocationEvents(c *gin.Context) {
	client, err := s.feedClient(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.feed.Events(c.Writer, c.Request, revfeed.Subscriber{Client: client.ID}); err != nil {
		s.fail(c, err)
	}
}

// revocationSnapshot serves GET /revocations (revfeed.Feed.Snapshot).
func (s *Server) revocationSnapshot(c *gin.Context) {
	if _, err := s.feedClient(c); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.feed.Snapshot(c.Writer, c.Request); err != nil {
		s.fail(c, err)
	}
}

// revocationPoll serves POST /revocations/poll (revfeed.Feed.Poll): an RFC
// 8936 poll, application/json, bounded by MaxBodyBytes.
func (s *Server) revocationPoll(c *gin.Context) {
	client, err := s.feedClient(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	req := c.Request
	if ct := req.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		s.fail(c, fmt.Errorf("%w: content type must be application/json (RFC 8936 §2.4)", token.ErrInvalidRequest))
		return
	}
	if req.URL.RawQuery != "" {
		s.fail(c, fmt.Errorf("%w: parameters belong in the body, not the URL", token.ErrInvalidRequest))
		return
	}
	body := http.MaxBytesReader(c.Writer, req.Body, s.opts.MaxBodyBytes)
	if err := s.feed.Poll(c.Writer, req, body, revfeed.Subscriber{Client: client.ID}); err != nil {
		s.fail(c, err)
	}
}
