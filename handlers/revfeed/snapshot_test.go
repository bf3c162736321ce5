package revfeed_test

import (
	"io"
	"testing"

	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
	"github.com/snowtoken/snowtoken/token/revlog"
)

// TestSnapshot checks the snapshot: one JWT signed by the issuer's key,
// application/jwt, holding the whole state.
func TestSnapshot(t *testing.T) {
	src := revfeedtest.New(true)
	tok := add(src, revlog.KindToken, "117811659438825472")
	sub := add(src, revlog.KindSubject, "alice")
	cli := add(src, revlog.KindClient, "partner")
	is := newIssuer(t, src, revfeed.Options{})
	resp := is.get(t, t.Context(), "/revocations?nonce="+testNonce, "api", nil)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/jwt" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var cl revfeed.SnapshotClaims
	is.verify(t, string(body), revfeed.TypeSnapshot, &cl)
	if cl.Nonce != testNonce || cl.Epoch != epoch || cl.Last != cli.ID || cl.Horizon != 1000 || !cl.Fresh ||
		len(cl.Tokens) != 1 || cl.Tokens[0] != (revfeed.RevokedToken{JTI: tok.Key, Exp: tok.Exp, At: tok.At}) ||
		len(cl.Subjects) != 1 || cl.Subjects[0] != (revfeed.RevokedName{Subject: sub.Key, At: sub.At}) ||
		len(cl.Clients) != 1 || cl.Clients[0] != (revfeed.RevokedClient{ClientID: cli.Key, Cutoff: cli.Cutoff, At: cli.At}) {
		t.Fatalf("snapshot %+v", cl)
	}
}
