package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
)

// withFeed serves the revocation feed from src (handlers.Options.Feed).
func withFeed(src revfeed.Source) envOption {
	return func(c *envConfig) { c.feed = src }
}

// TestRouteAuth walks every route the engine serves: each is in the route
// table, and asks for the caller the table declares. A route of anyone
// (none) never asks a client to authenticate; a client, admin or feed route
// refuses a request without credentials with the client authentication
// challenge (401, Basic), and an admin or feed route a client that
// authenticates but is neither an admin nor a follower of the feed (403);
// an admin route serves an admin.
func TestRouteAuth(t *testing.T) {
	e := newEnv(t, withFeed(revfeedtest.New(true)))
	declared := handlers.RouteAuth()
	params := strings.NewReplacer(":subject", "someone", ":client", "someclient", ":id", "1")
	send := func(method, path string, c *client) *response {
		hdr := http.Header{"Content-Type": {formType}}
		if strings.HasPrefix(path, "/revocations/poll") {
			hdr.Set("Content-Type", "application/json")
		}
		if c != nil {
			hdr.Set("Authorization", basic(c.ID, c.Secret))
		}
		return e.do(t, method, path, strings.NewReader(""), hdr)
	}
	asksClient := func(r *response) bool {
		return r.Status == http.StatusUnauthorized && strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Basic ")
	}
	seen := map[string]bool{}
	for _, rt := range e.Engine.Routes() {
		name := rt.Method + " " + rt.Path
		auth, ok := declared[name]
		if !ok {
			t.Errorf("%s: served, but not in the route table", name)
			continue
		}
		seen[name] = true
		path := params.Replace(rt.Path)
		t.Run(name, func(t *testing.T) {
			anon := send(rt.Method, path, nil)
			switch auth {
			case "none":
				if asksClient(anon) || anon.Status == http.StatusForbidden {
					t.Fatalf("declared none, but without credentials: %d %s %s", anon.Status, anon.Header.Get("WWW-Authenticate"), anon.Body)
				}
				return
			case "client", "admin", "feed":
				if !asksClient(anon) {
					t.Fatalf("declared %s, but without credentials: %d %q %s", auth, anon.Status, anon.Header.Get("WWW-Authenticate"), anon.Body)
				}
			default:
				t.Fatalf("declared %q, which is no caller", auth)
			}
			if auth == "client" {
				if r := send(rt.Method, path, &e.Normal); asksClient(r) || r.Status == http.StatusForbidden {
					t.Errorf("declared client, but a client is refused: %d %s", r.Status, r.Body)
				}
				return
			}
			if r := send(rt.Method, path, &e.Normal); r.Status != http.StatusForbidden {
				t.Errorf("declared %s, but a plain client gets %d %s", auth, r.Status, r.Body)
			}
			if auth == "admin" {
				if r := send(rt.Method, path, &e.Admin); r.Status != http.StatusNoContent {
					t.Errorf("declared admin, but an admin gets %d %s", r.Status, r.Body)
				}
			}
		})
	}
	for name := range declared {
		if !seen[name] {
			t.Errorf("%s: in the route table, not served", name)
		}
	}
}
