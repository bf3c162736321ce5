package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

func TestConnStates(t *testing.T) {
	a, b := &net.TCPConn{}, &net.TCPConn{} // only their identity matters
	type step struct {
		conn  net.Conn
		state http.ConnState
	}
	tests := []struct {
		name  string
		steps []step
		want  int // busy connections after the steps
	}{
		{"none", nil, 0},
		{"new is busy", []step{{a, http.StateNew}}, 1},
		{"active is busy", []step{{a, http.StateNew}, {a, http.StateActive}}, 1},
		{"idle is not", []step{{a, http.StateNew}, {a, http.StateActive}, {a, http.StateIdle}}, 0},
		{"idle, then a new request", []step{{a, http.StateNew}, {a, http.StateActive}, {a, http.StateIdle}, {a, http.StateActive}}, 1},
		{"closed while new", []step{{a, http.StateNew}, {a, http.StateClosed}}, 0},
		{"closed after answering", []step{{a, http.StateNew}, {a, http.StateActive}, {a, http.StateClosed}}, 0},
		{"closed while idle", []step{{a, http.StateNew}, {a, http.StateActive}, {a, http.StateIdle}, {a, http.StateClosed}}, 0},
		{"hijacked", []step{{a, http.StateNew}, {a, http.StateActive}, {a, http.StateHijacked}}, 0},
		{"two connections", []step{{a, http.StateNew}, {b, http.StateNew}, {a, http.StateActive}, {b, http.StateClosed}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConnStates()
			for _, s := range tt.steps {
				c.track(s.conn, s.state)
			}
			if got := c.busyCount(); got != tt.want {
				t.Errorf("busy: got %d, want %d", got, tt.want)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := c.waitIdle(ctx)
			if tt.want == 0 && err != nil {
				t.Errorf("waitIdle with nothing busy: %v, want nil", err)
			}
			if tt.want > 0 && !errors.Is(err, context.Canceled) {
				t.Errorf("waitIdle with %d busy and ctx done: %v, want context.Canceled", tt.want, err)
			}
		})
	}
}

// TestConnStatesWaitIdle checks that waitIdle returns once the last busy
// connection is answered, and not before.
func TestConnStatesWaitIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := &net.TCPConn{}, &net.TCPConn{}
		c := newConnStates()
		c.track(a, http.StateNew)
		c.track(b, http.StateNew)
		c.track(b, http.StateActive)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var returned atomic.Bool
		var err error
		go func() { err = c.waitIdle(ctx); returned.Store(true) }()

		c.track(a, http.StateActive)
		c.track(a, http.StateClosed) // b is still answering
		synctest.Wait()
		if returned.Load() {
			t.Fatalf("waitIdle returned (%v) with a connection still active", err)
		}
		c.track(b, http.StateIdle)
		synctest.Wait()
		if !returned.Load() || err != nil {
			t.Fatalf("waitIdle with every connection idle: returned %v, %v", returned.Load(), err)
		}
	})
}
