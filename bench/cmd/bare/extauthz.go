package main

import (
	"context"
	"net"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

// bareAuthorization answers every Check OK with the identity headers of a
// fixed token: all a grpc-go Authorization server must do.
type bareAuthorization struct {
	authv3.UnimplementedAuthorizationServer
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func (bareAuthorization) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
		Headers: []*corev3.HeaderValueOption{header("X-Auth-Subject", "bench"), header("X-Auth-Client", "bench"),
			header("X-Auth-Scope", "read"), header("X-Auth-Token-Id", "117811659438825472")},
	}}}, nil
}

// serveExtAuthz serves bareAuthorization on addr with grpc-go's defaults.
func serveExtAuthz(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	authv3.RegisterAuthorizationServer(s, bareAuthorization{})
	return s.Serve(ln)
}
