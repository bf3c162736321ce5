package server

import (
	"fmt"
	"net"
	"sync"
	"syscall"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
)

// capListener is a TCP listener that holds at most max accepted connections
// open at once: Accept waits for one of them to close before it takes the
// next from the kernel's backlog.
//
// golang.org/x/net/netutil.LimitListener does the same, but its connections
// wrap the *net.TCPConn in a type of its own that hides CloseWrite
// (golang/go#64830). net/http half-closes a connection it refuses (such as
// with a 431 for an oversized header) and lingers before closing it, so that
// the client reads the answer; behind LimitListener it closes at once, the
// client's unread bytes make the kernel send a reset, and the client sees
// "connection reset" instead of the 431. cappedConn embeds the *net.TCPConn,
// so every method of it stays.
type capListener struct {
	*net.TCPListener
	slots     chan struct{} // one element per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

func newCapListener(ln *net.TCPListener, max int) *capListener {
	return &capListener{TCPListener: ln, slots: make(chan struct{}, max), done: make(chan struct{})}
}

// Accept waits for a free slot, then accepts the next connection. Once the
// listener is closed it returns an error wrapping net.ErrClosed.
func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, fmt.Errorf("accept: %w", net.ErrClosed)
	}
	c, err := l.AcceptTCP()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &cappedConn{TCPConn: c, slots: l.slots}, nil
}

// Close closes the listener and ends a wait in Accept.
func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.TCPListener.Close()
}

// cappedConn frees its slot of a capListener when it is closed.
type cappedConn struct {
	*net.TCPConn
	slots     chan struct{}
	closeOnce sync.Once
}

func (c *cappedConn) Close() error {
	err := c.TCPConn.Close()
	c.closeOnce.Do(func() { <-c.slots })
	return err
}

// defaultMaxConns is SNOWTOKEN_MAX_CONNS's default for the process's
// open-file limit (RLIMIT_NOFILE, which Go raises to the hard limit at start).
func defaultMaxConns() (int, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	return MaxConnsFor(rl.Cur), nil
}

// MaxConnsFor is the connection cap for an open-file limit: the limit less
// 256 descriptors for Redis connections (go-redis pools up to ten per CPU),
// the listeners and files, or half of a limit below 512.
func MaxConnsFor(limit uint64) int {
	limit = min(limit, 1<<20) // RLIM_INFINITY
	if limit < 512 {
		return max(1, int(limit/2))
	}
	return int(limit - 256)
}

// feedSlots returns the revocation feed's bounds on streams and waiting
// polls (revfeed.Options.MaxSubscribers, MaxPerClient) for a connection cap
// of maxConns. Each of them holds a connection for as long as it lasts, so
// that the feed must leave some for every other request: the total is
// SNOWTOKEN_FEED_MAX_SUBSCRIBERS, which must be below the cap, else half
// the cap, at most revfeed.DefaultMaxSubscribers; a client's share is
// SNOWTOKEN_FEED_MAX_PER_CLIENT, at most the total, else
// revfeed.DefaultMaxPerClient, or the total if less.
func feedSlots(cfg config.Config, maxConns int) (total, perClient int, err error) {
	switch total = cfg.FeedMaxSubscribers; {
	case total >= maxConns:
		return 0, 0, fmt.Errorf("%w: SNOWTOKEN_FEED_MAX_SUBSCRIBERS=%d: want fewer than the connection cap, SNOWTOKEN_MAX_CONNS (%d): "+
			"each stream and waiting poll of the revocation feed holds a connection, and the feed must leave some for every other request", config.ErrConfig, total, maxConns)
	case total == 0:
		if total = min(maxConns/2, revfeed.DefaultMaxSubscribers); total == 0 {
			return 0, 0, fmt.Errorf("%w: SNOWTOKEN_MAX_CONNS=%d leaves no connection for the revocation feed, which may hold half of them: want at least 2", config.ErrConfig, maxConns)
		}
	}
	switch perClient = cfg.FeedMaxPerClient; {
	case perClient > total:
		return 0, 0, fmt.Errorf("%w: SNOWTOKEN_FEED_MAX_PER_CLIENT=%d: want at most the feed's total, SNOWTOKEN_FEED_MAX_SUBSCRIBERS (%d)", config.ErrConfig, perClient, total)
	case perClient == 0:
		perClient = min(revfeed.DefaultMaxPerClient, total)
	}
	return total, perClient, nil
}
