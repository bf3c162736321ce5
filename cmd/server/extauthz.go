package server

import (
	"context"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/handlers/extauthz"
)

// extAuthz is the ext_authz gRPC listener (SNOWTOKEN_EXTAUTHZ_ADDR,
// package handlers/extauthz), with the HTTP server's lifecycle: bound at
// start, so that a taken port stops start-up; SERVING (gRPC health) once
// the issuer serves; NOT_SERVING from the drain on; its calls in flight
// finished within the shutdown grace. The zero extAuthz (off) does nothing.
type extAuthz struct {
	ln  net.Listener
	srv *extauthz.Server
}

// listenExtAuthz binds addr; an empty addr (off) binds nothing.
func listenExtAuthz(addr string) (*extAuthz, error) {
	if addr == "" {
		return &extAuthz{}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("SNOWTOKEN_EXTAUTHZ_ADDR: %w", err)
	}
	return &extAuthz{ln: ln}, nil
}

// addr is the address bound, or "off".
func (e *extAuthz) addr() string {
	if e.ln == nil {
		return "off"
	}
	return e.ln.Addr().String()
}

// close releases the listener of a start that failed before serve.
func (e *extAuthz) close() {
	if e.ln != nil && e.srv == nil {
		e.ln.Close()
	}
}

// serve serves h's checks and reports SERVING; what the server returns,
// if it stops on its own, goes to errc.
func (e *extAuthz) serve(h *handlers.Server, reg *prometheus.Registry, tp trace.TracerProvider, errc chan<- error) error {
	if e.ln == nil {
		return nil
	}
	srv, err := extauthz.New(extauthz.Options{Authorizer: h, Registry: reg, TracerProvider: tp})
	if err != nil {
		return err
	}
	e.srv = srv
	go func() {
		if err := srv.Serve(e.ln); err != nil {
			errc <- fmt.Errorf("ext_authz listener: %w", err)
		}
	}()
	srv.SetServing(true)
	return nil
}

// drain reports NOT_SERVING, so that gateways that check health stop
// sending; calls are still answered.
func (e *extAuthz) drain() {
	if e.srv != nil {
		e.srv.SetServing(false)
	}
}

// stop finishes the calls in flight, until ctx ends.
func (e *extAuthz) stop(ctx context.Context) {
	if e.srv != nil {
		e.srv.Stop(ctx)
	}
}
