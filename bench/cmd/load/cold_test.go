package main

import (
	"net/url"
	"testing"
)

// TestNeverSeenRows: hot JWT validation and the cached exchange are each
// followed by their never-seen twin, on the floor its work names, whose
// pooled token goes where the request carries its token; no other
// endpoint has one.
func TestNeverSeenRows(t *testing.T) {
	for _, tc := range []struct {
		i           int
		name, floor string
		token       func(httpReq) string // where the request carries its token
	}{
		{hotJWT, neverSeenName, floorVerify, func(r httpReq) string {
			for _, h := range r.header {
				if h[0] == "Authorization" {
					return h[1]
				}
			}
			return ""
		}},
		{cachedExchange, neverSeenExchangeName, floorSignAndProof, func(r httpReq) string {
			form, err := url.ParseQuery(r.body)
			if err != nil || form.Get("subject_token_type") == "" {
				return ""
			}
			return "Bearer " + form.Get("subject_token")
		}},
	} {
		r, pool := neverSeen(tc.i, "http://issuer", "Basic x")
		if r == nil {
			t.Fatalf("endpoint %d: no never-seen row", tc.i)
		}
		if r.name != tc.name || r.floor != tc.floor {
			t.Errorf("endpoint %d: row %q on floor %q, want %q on %q", tc.i, r.name, r.floor, tc.name, tc.floor)
		}
		if got := tc.token(pool.slot.fill(pool.req, "eyJ.pooled.sig")); got != "Bearer eyJ.pooled.sig" {
			t.Errorf("endpoint %d: the pooled token goes in as %q, want it as the request's token", tc.i, got)
		}
		ref := &row{name: "ref"}
		rows := neverSeenRows(tc.i, t.TempDir(), "http://issuer", "Basic x", ref, 1, 2)
		if len(rows) != 1 || rows[0].server != 1 || rows[0].redis != 2 || rows[0].prepare == nil {
			t.Errorf("endpoint %d: never-seen rows %+v, want one pooled row measuring server 1 and Redis 2", tc.i, rows)
		}
	}
	if r, _ := neverSeen(hotJWT+1, "http://issuer", "Basic x"); r != nil {
		t.Errorf("endpoint %d has a never-seen row %q, want none", hotJWT+1, r.name)
	}
}
