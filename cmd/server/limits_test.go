package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
)

func TestMaxConnsFor(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		want  int
	}{
		{1, 1},
		{64, 32},
		{511, 255},
		{512, 256},
		{1024, 768},
		{20000, 19744},
		{^uint64(0), 1<<20 - 256}, // RLIM_INFINITY
	} {
		if got := MaxConnsFor(tc.limit); got != tc.want {
			t.Errorf("MaxConnsFor(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}

// TestCapListener: a connection closed frees its slot for the next, Close
// ends a wait for a slot, and connections keep the methods of a
// *net.TCPConn that net/http uses (CloseWrite: see capListener).
func TestCapListener(t *testing.T) {
	const wait = 10 * time.Second
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newCapListener(raw.(*net.TCPListener), 1)
	defer ln.Close()
	for range 2 { // both wait in the backlog: the cap takes one at a time
		c, err := net.DialTimeout("tcp", ln.Addr().String(), wait)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}

	first, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.(interface{ CloseWrite() error }); !ok {
		t.Errorf("an accepted connection (%T) has no CloseWrite", first)
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	accept := func() <-chan accepted {
		ch := make(chan accepted, 1)
		go func() {
			c, err := ln.Accept()
			ch <- accepted{c, err}
		}()
		return ch
	}
	next := accept()
	first.Close()
	first.Close() // a second Close frees nothing more
	var second accepted
	select {
	case second = <-next:
		if second.err != nil {
			t.Fatalf("Accept after the first connection closed: %v", second.err)
		}
	case <-time.After(wait):
		t.Fatal("Accept still waits after the first connection closed")
	}
	waiting := accept() // the slot is the second's
	ln.Close()
	select {
	case a := <-waiting:
		if !errors.Is(a.err, net.ErrClosed) {
			t.Errorf("Accept waiting for a slot, listener closed: %v, want net.ErrClosed", a.err)
		}
	case <-time.After(wait):
		t.Fatal("Accept still waits for a slot after Close")
	}
	second.c.Close()
}

// TestConnStatesLimit checks when the server is told it is at its
// connection cap (4), and when it is no longer.
func TestConnStatesLimit(t *testing.T) {
	conns := make([]net.Conn, 5)
	for i := range conns {
		conns[i] = &net.TCPConn{} // only their identity matters
	}
	var got []bool
	c := newConnStates()
	c.setLimit(4, func(full bool) { got = append(got, full) })
	steps := []struct {
		conn  int
		state http.ConnState
		want  []bool // every call of onFull so far
	}{
		{0, http.StateNew, nil},
		{1, http.StateNew, nil},
		{2, http.StateNew, nil},
		{2, http.StateActive, nil},
		{3, http.StateNew, []bool{true}},
		{3, http.StateActive, []bool{true}},
		{3, http.StateIdle, []bool{true}},
		{0, http.StateClosed, []bool{true, false}},
		{4, http.StateNew, []bool{true, false, true}},
		{4, http.StateHijacked, []bool{true, false, true, false}},
	}
	for i, s := range steps {
		c.track(conns[s.conn], s.state)
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Fatalf("step %d (conn %d %v): onFull calls %v, want %v", i, s.conn, s.state, got, s.want)
		}
	}
}

// TestFeedSlots: the revocation feed's bounds follow the connection cap,
// half of it by default (at most revfeed's 1000) and below it when set, so
// that the feed's streams and long polls never hold every connection; a
// client's share is revfeed's default, at most the total.
func TestFeedSlots(t *testing.T) {
	for _, tc := range []struct {
		maxConns, setTotal, setPerClient int
		total, perClient                 int
		err                              string // in the error; empty: none
	}{
		{maxConns: 40, total: 20, perClient: 8},
		{maxConns: 10, total: 5, perClient: 5},
		{maxConns: 2, total: 1, perClient: 1},
		{maxConns: 1 << 20, total: revfeed.DefaultMaxSubscribers, perClient: revfeed.DefaultMaxPerClient},
		{maxConns: 40, setTotal: 39, setPerClient: 39, total: 39, perClient: 39},
		{maxConns: 40, setTotal: 40, err: "SNOWTOKEN_FEED_MAX_SUBSCRIBERS=40: want fewer than the connection cap, SNOWTOKEN_MAX_CONNS (40)"},
		{maxConns: 40, setTotal: 400, err: "SNOWTOKEN_FEED_MAX_SUBSCRIBERS=400"},
		{maxConns: 40, setPerClient: 21, err: "SNOWTOKEN_FEED_MAX_PER_CLIENT=21: want at most the feed's total, SNOWTOKEN_FEED_MAX_SUBSCRIBERS (20)"},
		{maxConns: 1, err: "SNOWTOKEN_MAX_CONNS=1 leaves no connection for the revocation feed"},
	} {
		cfg := config.Config{MaxConns: tc.maxConns, FeedMaxSubscribers: tc.setTotal, FeedMaxPerClient: tc.setPerClient}
		total, perClient, err := feedSlots(cfg, tc.maxConns)
		switch {
		case tc.err != "" && (!errors.Is(err, config.ErrConfig) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%+v: %v, want an error with %q", tc, err, tc.err)
		case tc.err == "" && (err != nil || total != tc.total || perClient != tc.perClient):
			t.Errorf("%+v: %d, %d, %v; want %d, %d", tc, total, perClient, err, tc.total, tc.perClient)
		}
	}
}
