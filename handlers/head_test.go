package handlers_test

import (
	"net/http"
	"testing"
)

// TestHeadEveryGETRoute: every GET route answers HEAD as it answers GET,
// same status and headers, no body (RFC 9110 §9.3.2), so that uptime
// checkers, caches and load balancers' health checks work. It walks the
// engine's routes: a GET route added later is checked too.
func TestHeadEveryGETRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	live := e.issue(t, e.Normal, nil).AccessToken
	gets := 0
	for _, rt := range e.Engine.Routes() {
		if rt.Method != http.MethodGet {
			continue
		}
		gets++
		path := fillParams(rt.Path)
		for _, auth := range []string{"", "Bearer " + live} {
			t.Run(rt.Path+" "+auth[:min(len(auth), 6)], func(t *testing.T) {
				hdr := http.Header{}
				if auth != "" {
					hdr.Set("Authorization", auth)
				}
				get := e.do(t, http.MethodGet, path, nil, hdr)
				head := e.do(t, http.MethodHead, path, nil, hdr)
				if head.Status == http.StatusMethodNotAllowed || head.Status != get.Status {
					t.Fatalf("HEAD %s: status %d, GET %d", path, head.Status, get.Status)
				}
				if len(head.Body) != 0 {
					t.Errorf("HEAD %s: a body of %d bytes", path, len(head.Body))
				}
				for _, k := range []string{"Content-Type", "Cache-Control", "WWW-Authenticate", "X-Auth-Subject", "X-Auth-Token-Id"} {
					if head.Header.Get(k) != get.Header.Get(k) {
						t.Errorf("HEAD %s: %s %q, GET %q", path, k, head.Header.Get(k), get.Header.Get(k))
					}
				}
			})
		}
	}
	if gets < 6 {
		t.Errorf("%d GET routes, want at least 6: the walk found too few", gets)
	}
}
