package revfeed_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
)

// TestSnapshot checks the snapshot: one JWT signed by the issuer's key,
// application/jwt, holding the whole state.
func TestSnapshot(t *testing.T) {
	src := revfeedtest.New(true)
	tok := add(src, revocation.KindToken, "117811659438825472")
	sub := add(src, revocation.KindSubject, "alice")
	cli := add(src, revocation.KindClient, "partner")
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
	var cl revocation.SnapshotClaims
	is.verify(t, string(body), revocation.TypeSnapshot, &cl)
	if cl.Nonce != testNonce || cl.Epoch != epoch || cl.Last != cli.ID || cl.Horizon != 1000 || !cl.Fresh ||
		len(cl.Tokens) != 1 || cl.Tokens[0] != (revocation.RevokedToken{JTI: tok.Key, Exp: tok.Exp, At: tok.At}) ||
		len(cl.Subjects) != 1 || cl.Subjects[0] != (revocation.RevokedName{Subject: sub.Key, At: sub.At}) ||
		len(cl.Clients) != 1 || cl.Clients[0] != (revocation.RevokedClient{ClientID: cli.Key, Cutoff: cli.Cutoff, At: cli.At}) {
		t.Fatalf("snapshot %+v", cl)
	}
}

// heldSource is a Source whose Snapshot, once it has read the state, says
// so on built and, until let, waits: a snapshot held in its build.
type heldSource struct {
	*revfeedtest.Source
	built   chan struct{}
	release chan struct{}
	let     func() // closes release, once
}

// newHeldSource holds src's snapshots until let.
func newHeldSource(src *revfeedtest.Source) *heldSource {
	s := &heldSource{Source: src, built: make(chan struct{}, 16), release: make(chan struct{})}
	s.let = sync.OnceFunc(func() { close(s.release) })
	return s
}

// newHeldIssuer serves src; the test's end lets its snapshots go before
// the server closes, which waits for them.
func newHeldIssuer(t *testing.T, src *heldSource, opts revfeed.Options) *issuer {
	is := newIssuer(t, src, opts)
	t.Cleanup(src.let) // cleanups run last first
	return is
}

func (s *heldSource) Snapshot(now time.Time) revocation.Snapshot {
	snap := s.Source.Snapshot(now)
	s.built <- struct{}{}
	<-s.release
	return snap
}

// wait fails the test unless ch receives within hangGuard.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}

// result is an answer read whole, or the error that ended it.
type result struct {
	resp *http.Response
	body []byte
	err  error
}

// goSnapshot sends GET /revocations with nonce (none if empty) as the
// client "api" and reads the answer whole onto the returned channel.
func (is *issuer) goSnapshot(ctx context.Context, nonce string) <-chan result {
	return is.goSnapshotAs(ctx, "api", nonce)
}

// goSnapshotAs is goSnapshot as client.
func (is *issuer) goSnapshotAs(ctx context.Context, client, nonce string) <-chan result {
	out := make(chan result, 1)
	u := is.URL + "/revocations"
	if nonce != "" {
		u += "?nonce=" + nonce
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		out <- result{err: err}
		return out
	}
	req.SetBasicAuth(client, is.creds[client])
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		out <- result{resp: resp, body: body, err: err}
	}()
	return out
}

// snapshotOK checks that r is a snapshot for nonce and returns its claims.
func (is *issuer) snapshotOK(t *testing.T, r result, nonce string) revocation.SnapshotClaims {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", r.resp.StatusCode, r.body)
	}
	var cl revocation.SnapshotClaims
	is.verify(t, string(r.body), revocation.TypeSnapshot, &cl)
	if cl.Nonce != nonce {
		t.Fatalf("nonce %q, want %q", cl.Nonce, nonce)
	}
	return cl
}

// TestSnapshotsBounded checks that past MaxSnapshots a snapshot is refused
// at once with 503 temporarily_unavailable and Retry-After, without
// building another, and is served again once the one in progress ends.
func TestSnapshotsBounded(t *testing.T) {
	src := newHeldSource(revfeedtest.NewLarge(revocation.KindSubject, 20_000))
	is := newHeldIssuer(t, src, revfeed.Options{MaxSnapshots: 1})
	first := is.goSnapshot(t.Context(), testNonce)
	wait(t, src.built, "first snapshot built") // and held there, in its place
	second := is.goSnapshot(t.Context(), testNonce)
	select {
	case <-src.built:
		t.Fatal("a second snapshot built while the first holds the only place")
	case r := <-second:
		if r.err != nil {
			t.Fatal(r.err)
		}
		var e struct {
			Error string `json:"error"`
		}
		if r.resp.StatusCode != http.StatusServiceUnavailable || r.resp.Header.Get("Retry-After") != "1" ||
			json.Unmarshal(r.body, &e) != nil || e.Error != "temporarily_unavailable" {
			t.Fatalf("past the bound: %d, Retry-After %q, %s; want 503 temporarily_unavailable, Retry-After 1",
				r.resp.StatusCode, r.resp.Header.Get("Retry-After"), r.body)
		}
	case <-time.After(hangGuard):
		t.Fatal("no answer past the bound")
	}
	src.let()
	if cl := is.snapshotOK(t, wait(t, first, "first answer"), testNonce); len(cl.Subjects) != 20_000 {
		t.Fatalf("%d subjects, want 20000", len(cl.Subjects))
	}
	is.snapshotOK(t, wait(t, is.goSnapshot(t.Context(), testNonce), "third answer"), testNonce)
}

// TestSnapshotsPerClient checks that one client holds at most
// MaxSnapshotsPerClient snapshots at once: past it 429
// temporarily_unavailable with Retry-After, while another client is still
// served, so that one credential (every replica of a service, after an
// epoch rotation, or a client asking in a loop) cannot take every place
// (the bound was only in all).
func TestSnapshotsPerClient(t *testing.T) {
	src := newHeldSource(revfeedtest.NewLarge(revocation.KindSubject, 1_000))
	is := newHeldIssuer(t, src, revfeed.Options{})
	first := is.goSnapshot(t.Context(), testNonce)
	wait(t, src.built, "first snapshot built") // and held there, in its place
	r := wait(t, is.goSnapshot(t.Context(), testNonce), "an answer past the client's bound")
	var e struct {
		Error string `json:"error"`
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.resp.StatusCode != http.StatusTooManyRequests || r.resp.Header.Get("Retry-After") == "" ||
		json.Unmarshal(r.body, &e) != nil || e.Error != "temporarily_unavailable" {
		t.Fatalf("a client's second snapshot at once: %d, Retry-After %q, %s; want 429 temporarily_unavailable with Retry-After",
			r.resp.StatusCode, r.resp.Header.Get("Retry-After"), r.body)
	}
	other := is.goSnapshotAs(t.Context(), "ops", testNonce) // another client: a place of its own, sharing the build
	src.let()
	is.snapshotOK(t, wait(t, first, "first answer"), testNonce)
	is.snapshotOK(t, wait(t, other, "the other client's answer"), testNonce)
	is.snapshotOK(t, wait(t, is.goSnapshot(t.Context(), testNonce), "the client's next answer"), testNonce)
}

// TestSnapshotBuiltOncePerVersion checks that the state's part of the
// snapshot is built once per state version and shared, each answer signed
// for its own request (its nonce, of every length modulo 3, or none), and
// that a new version is built again.
func TestSnapshotBuiltOncePerVersion(t *testing.T) {
	src := revfeedtest.New(true)
	add(src, revocation.KindToken, "117811659438825472")
	sub := add(src, revocation.KindSubject, "alice")
	is := newIssuer(t, src, revfeed.Options{MaxSnapshotsPerClient: revfeed.DefaultMaxSnapshots})
	nonces := []string{testNonce[:22], testNonce[:23], testNonce[:24], strings.Repeat(testNonce, 3)[:128], ""}
	var answers []<-chan result
	for _, n := range nonces[:revfeed.DefaultMaxSnapshots] { // as many at once as the default bound lets in
		answers = append(answers, is.goSnapshot(t.Context(), n))
	}
	for i, n := range nonces {
		if i >= len(answers) {
			answers = append(answers, is.goSnapshot(t.Context(), n))
		}
		cl := is.snapshotOK(t, wait(t, answers[i], "an answer"), n)
		if cl.Last != sub.ID || len(cl.Tokens) != 1 || len(cl.Subjects) != 1 || !cl.Fresh {
			t.Fatalf("snapshot %+v", cl)
		}
	}
	if n := src.Snapshots(); n != 1 {
		t.Fatalf("%d snapshots built for %d answers of one state, want 1", n, len(nonces))
	}
	cli := add(src, revocation.KindClient, "partner")
	cl := is.snapshotOK(t, wait(t, is.goSnapshot(t.Context(), testNonce), "an answer"), testNonce)
	if n := src.Snapshots(); n != 2 || cl.Last != cli.ID || len(cl.Clients) != 1 {
		t.Fatalf("after a revocation: %d built, last %s, clients %v; want 2, %s, partner", n, cl.Last, cl.Clients, cli.ID)
	}
}

// unversioned is a Source whose Status.Version stays 0, against the
// contract.
type unversioned struct{ *revfeedtest.Source }

func (s unversioned) Status(now time.Time) revocation.Status {
	st := s.Source.Status(now)
	st.Version = 0
	return st
}

func (s unversioned) Snapshot(now time.Time) revocation.Snapshot {
	sn := s.Source.Snapshot(now)
	sn.Version = 0
	return sn
}

// TestSnapshotOfAnUnversionedSource checks that a Source whose version
// stays put still gets a snapshot built again once its last moves: a
// snapshot is never served for a state it does not hold.
func TestSnapshotOfAnUnversionedSource(t *testing.T) {
	src := revfeedtest.New(true)
	add(src, revocation.KindSubject, "alice")
	is := newIssuer(t, unversioned{src}, revfeed.Options{})
	is.snapshotOK(t, wait(t, is.goSnapshot(t.Context(), testNonce), "an answer"), testNonce)
	bob := add(src, revocation.KindSubject, "bob")
	if cl := is.snapshotOK(t, wait(t, is.goSnapshot(t.Context(), testNonce), "an answer"), testNonce); cl.Last != bob.ID || len(cl.Subjects) != 2 {
		t.Fatalf("after bob: last %s, %d subjects; want %s, 2", cl.Last, len(cl.Subjects), bob.ID)
	}
}

// TestSnapshotOfAnEarlierVersion checks that a snapshot whose state moved
// on while it was built says so (fresh false), and that the next request,
// which arrives after the move, gets a snapshot built again.
func TestSnapshotOfAnEarlierVersion(t *testing.T) {
	src := newHeldSource(revfeedtest.New(true))
	src.SetFresh(true, 7*time.Millisecond)
	first := add(src.Source, revocation.KindSubject, "alice")
	is := newHeldIssuer(t, src, revfeed.Options{})
	answer := is.goSnapshot(t.Context(), testNonce)
	wait(t, src.built, "snapshot built")
	later := add(src.Source, revocation.KindSubject, "bob")
	src.let()
	if cl := is.snapshotOK(t, wait(t, answer, "an answer"), testNonce); cl.Last != first.ID || cl.Fresh || cl.AgeMs != 0 {
		t.Fatalf("built before bob: last %s, fresh %v, age_ms %d; want %s, false, 0", cl.Last, cl.Fresh, cl.AgeMs, first.ID)
	}
	if cl := is.snapshotOK(t, wait(t, is.goSnapshot(t.Context(), testNonce), "an answer"), testNonce); cl.Last != later.ID || !cl.Fresh || cl.AgeMs != 7 {
		t.Fatalf("after bob: last %s, fresh %v, age_ms %d; want %s, true, 7", cl.Last, cl.Fresh, cl.AgeMs, later.ID)
	}
}

// TestSnapshotHead checks that HEAD /revocations answers the snapshot's
// status and headers without building one.
func TestSnapshotHead(t *testing.T) {
	src := revfeedtest.New(true)
	add(src, revocation.KindToken, "1")
	is := newIssuer(t, src, revfeed.Options{})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodHead, is.URL+"/revocations", nil)
	req.SetBasicAuth("api", is.creds["api"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/jwt" || src.Snapshots() != 0 {
		t.Fatalf("HEAD: %d %q, %d built", resp.StatusCode, resp.Header.Get("Content-Type"), src.Snapshots())
	}
}
