package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// finish stops srv, which serves ln and sends what Serve returned on served,
// without dropping a request it has read: it stops accepting, lets every
// connection it accepted send its request and get its answer, and only then
// calls Shutdown, which closes the idle keep-alive connections left.
//
// Shutdown alone loses requests under load: once it has begun, net/http
// drops without an answer any request it then reads, also on a connection
// it accepted a moment before and has not answered on yet (golang/go#75591).
// The client sees EOF on a new connection and, for POST /token, cannot know
// whether a token was issued.
//
// Answers say Connection: close from the drain on, so a connection closes
// after its answer; what stays open is idle. A request sent on an idle
// keep-alive connection just as Shutdown closes it is the client's to send
// again (RFC 9112 §9.3.1): net/http reads it only to drop it.
//
// What finish cannot help: closing a listening socket resets the connections
// still in the kernel's accept queue. The server never read their requests;
// the drain's failing /readyz is what keeps balancers from sending them.
func finish(ctx context.Context, srv *http.Server, ln net.Listener, served <-chan error, conns *connStates) error {
	ln.Close() // Serve closes it too: the error of the second Close does not matter
	if err := <-served; !errors.Is(err, net.ErrClosed) {
		return err
	}
	// Serve has returned: every connection it accepted is in conns.
	if err := conns.waitIdle(ctx); err != nil {
		return fmt.Errorf("shutdown: %d connections still busy: %w", conns.busyCount(), err)
	}
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// connStates follows a server's connections through http.Server.ConnState,
// so that finish can wait until none is reading or answering a request, and
// so that the server can let go of idle connections at its connection cap
// (setLimit).
type connStates struct {
	mu    sync.Mutex
	state map[net.Conn]http.ConnState
	busy  int           // connections new or active
	quiet chan struct{} // receives when busy drops to zero

	max    int        // the connection cap; 0: none
	full   bool       // max connections are open, and not a quarter of them has closed since
	onFull func(bool) // told when full changes
}

// setLimit has onFull(true) called, under c's lock, once max connections
// are open, and onFull(false) once a quarter of them (at least one) has
// closed since. Call it before the server starts.
func (c *connStates) setLimit(max int, onFull func(full bool)) {
	c.max, c.onFull = max, onFull
}

func newConnStates() *connStates {
	return &connStates{state: map[net.Conn]http.ConnState{}, quiet: make(chan struct{}, 1)}
}

// busyState reports whether a connection in state s may hold a request the
// server has not answered: a new connection has not sent it yet, an active
// one is being read or answered.
func busyState(s http.ConnState) bool {
	return s == http.StateNew || s == http.StateActive
}

// track is the http.Server.ConnState hook.
func (c *connStates) track(conn net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if was, ok := c.state[conn]; ok && busyState(was) {
		c.busy--
	}
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(c.state, conn)
	default:
		c.state[conn] = s
		if busyState(s) {
			c.busy++
		}
	}
	if c.max > 0 {
		switch open := len(c.state); {
		case !c.full && open >= c.max:
			c.full = true
			c.onFull(true)
		case c.full && open <= c.max-max(1, c.max/4):
			c.full = false
			c.onFull(false)
		}
	}
	if c.busy == 0 {
		select {
		case c.quiet <- struct{}{}:
		default:
		}
	}
}

// busyCount is the number of connections new or active.
func (c *connStates) busyCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busy
}

// waitIdle returns once no connection is new or active, or ctx's error once
// it ends. A new connection that never sends a request counts until the
// server's ReadHeaderTimeout closes it.
func (c *connStates) waitIdle(ctx context.Context) error {
	for c.busyCount() > 0 {
		select {
		case <-c.quiet:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
