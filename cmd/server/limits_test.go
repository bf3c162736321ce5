package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
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
