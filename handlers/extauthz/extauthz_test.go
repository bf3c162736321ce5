package extauthz

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/token"
)

// The e2e tests (e2e/extauthz_test.go) run Check on the real issuer
// against GET /token/validate; these check what this package alone
// decides: how a CheckRequest is read, how an answer is written.

func httpRequest(hr *authv3.AttributeContext_HttpRequest, ext map[string]string) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: hr}, ContextExtensions: ext}}
}

func TestResource(t *testing.T) {
	hr := &authv3.AttributeContext_HttpRequest{Method: "GET", Scheme: "https", Host: "api.test", Path: "/orders?x=1",
		Headers: map[string]string{"authorization": "DPoP tok", "dpop": "proof", "cookie": "c", "Authorization": "Bearer other"}}
	r, err := resource(httpRequest(hr, map[string]string{"audience": "https://api.test", "scope": "read write"}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Audience, []string{"https://api.test"}) || r.Scope != "read write" ||
		r.Method != "GET" || r.Scheme != "https" || r.Host != "api.test" || r.Path != "/orders?x=1" {
		t.Errorf("resource %+v", r)
	}
	// Both spellings of Authorization are read: two values, which the
	// verdict refuses as a malformed request, as GET /token/validate does.
	if got := r.Header.Values("Authorization"); len(got) != 2 {
		t.Errorf("Authorization %q, want both values", got)
	}
	if got := r.Header.Values("DPoP"); !slices.Equal(got, []string{"proof"}) {
		t.Errorf("DPoP %q", got)
	}
	if _, ok := r.Header["Cookie"]; ok {
		t.Error("a header the verdict does not read was copied")
	}

	t.Run("header_map keeps repeated headers apart", func(t *testing.T) {
		hr := &authv3.AttributeContext_HttpRequest{Headers: map[string]string{"authorization": "Bearer a,Bearer b"},
			HeaderMap: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
				{Key: "authorization", Value: "Bearer a"}, {Key: "authorization", RawValue: []byte("Bearer b")}}}}
		r, err := resource(httpRequest(hr, nil))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Header.Values("Authorization"); !slices.Equal(got, []string{"Bearer a", "Bearer b"}) {
			t.Errorf("Authorization %q, want header_map's two values", got)
		}
	})
	t.Run("unknown context extension", func(t *testing.T) {
		for _, k := range []string{"scopes", "aud", "Scope", ""} {
			if _, err := resource(httpRequest(hr, map[string]string{"scope": "read", k: "x"})); !errors.Is(err, ErrExtension) {
				t.Errorf("extension %q: %v, want ErrExtension", k, err)
			}
		}
	})
	t.Run("txn_token", func(t *testing.T) {
		req := httpRequest(hr, map[string]string{"txn_token": "1"})
		req.Attributes.Source = &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "203.0.113.9"}}}}
		r, err := resource(req)
		if err != nil || !r.TxnToken || r.Addr != "203.0.113.9" {
			t.Errorf("txn_token 1: %+v %v, want a Txn-Token asked for, the source's address", r, err)
		}
		for _, v := range []string{"", "0", "true", "yes"} {
			if _, err := resource(httpRequest(hr, map[string]string{"txn_token": v})); !errors.Is(err, ErrExtension) {
				t.Errorf("txn_token %q: %v, want ErrExtension", v, err)
			}
		}
	})
	t.Run("empty values are requirements", func(t *testing.T) {
		r, err := resource(httpRequest(hr, map[string]string{"audience": ""}))
		if err != nil || !slices.Equal(r.Audience, []string{""}) {
			t.Errorf("audience \"\": %v %v, want one empty audience (the verdict refuses it, as ?audience=)", r.Audience, err)
		}
	})
}

func TestResponseOK(t *testing.T) {
	h := http.Header{}
	h.Set("Cache-Control", "no-store")
	h.Set(handlers.HeaderSubject, "alice")
	h.Set(handlers.HeaderClient, "svc")
	h.Set(handlers.HeaderScope, "") // a token without scopes
	h.Set(handlers.HeaderTokenID, "1")
	resp := response(handlers.Answer{Status: http.StatusOK, Header: h})
	ok := resp.GetOkResponse()
	if resp.GetStatus().GetCode() != int32(codes.OK) || ok == nil {
		t.Fatalf("%v, want OK", resp)
	}
	var set []string
	for _, o := range ok.GetHeaders() {
		set = append(set, o.GetHeader().GetKey())
		if o.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			t.Errorf("%s: %v, want OVERWRITE_IF_EXISTS_OR_ADD", o.GetHeader().GetKey(), o.GetAppendAction())
		}
	}
	if want := []string{handlers.HeaderSubject, handlers.HeaderClient, handlers.HeaderTokenID}; !slices.Equal(set, want) {
		t.Errorf("set %v, want %v (Cache-Control is the answer's, not the upstream request's)", set, want)
	}
	// The token has no actor (no X-Auth-Actor in the answer): a client's
	// copy of that header must not survive either.
	if !slices.Equal(ok.GetHeadersToRemove(), []string{"x-auth-scope", "x-auth-actor", "txn-token"}) {
		t.Errorf("headers_to_remove %v, want the empty and the absent ones: a client's copy must not survive", ok.GetHeadersToRemove())
	}
}

func TestResponseDenied(t *testing.T) {
	for status, want := range map[int]codes.Code{401: codes.Unauthenticated, 403: codes.PermissionDenied, 400: codes.InvalidArgument,
		429: codes.ResourceExhausted, 503: codes.Unavailable, 500: codes.Internal} {
		h := http.Header{"Www-Authenticate": {`Bearer realm="snowtoken"`}, "Cache-Control": {"no-store"}}
		resp := response(handlers.Answer{Status: status, Header: h, Body: []byte(`{"error":"x"}`)})
		d := resp.GetDeniedResponse()
		if codes.Code(resp.GetStatus().GetCode()) != want || d == nil || int(d.GetStatus().GetCode()) != status || d.GetBody() != `{"error":"x"}` {
			t.Errorf("%d: %v, want %v denied with its status and body", status, resp, want)
			continue
		}
		if len(d.GetHeaders()) != 2 || d.GetHeaders()[0].GetHeader().GetKey() != "Cache-Control" || d.GetHeaders()[1].GetHeader().GetValue() != `Bearer realm="snowtoken"` {
			t.Errorf("%d: headers %v", status, d.GetHeaders())
		}
	}
}

// waiting is an Authorizer that answers only once its ctx ends, as a
// verdict waiting on Redis does, and then a 503 (what Authorize answers
// for a Redis command its ctx cut short).
type waiting struct{}

func (waiting) Authorize(ctx context.Context, _ handlers.Resource) handlers.Answer {
	<-ctx.Done()
	return handlers.Answer{Status: http.StatusServiceUnavailable, Header: http.Header{}, Err: token.ErrUnavailable}
}

func (waiting) Refusal(h http.Header, err error, _ string) handlers.Answer {
	return handlers.Answer{Status: http.StatusInternalServerError, Header: h, Err: err}
}

func TestCheckAbandoned(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Options{Authorizer: waiting{}, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	resp, err := s.Check(ctx, httpRequest(&authv3.AttributeContext_HttpRequest{}, nil))
	if status.Code(err) != codes.Canceled || resp != nil {
		t.Errorf("Check cancelled: %v %v, want Canceled and no answer", resp, err)
	}
	if got := testutil.ToFloat64(s.metrics.checks.WithLabelValues(outcomeAbandoned)); got != 1 {
		t.Errorf("abandoned checks %v, want 1", got)
	}
}

func TestNewOptions(t *testing.T) {
	for _, o := range []Options{{}, {Authorizer: waiting{}, MaxRecvMsgSize: -1}} {
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("New(%+v): %v, want ErrOptions", o, err)
		}
	}
}

// FuzzResource: any CheckRequest Envoy could send is read without a panic,
// to the two credential headers alone, and one with a context extension
// other than audience and scope is refused.
func FuzzResource(f *testing.F) {
	seed, _ := proto.Marshal(httpRequest(&authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/",
		Headers: map[string]string{"authorization": "Bearer x", "dpop": "p"}}, map[string]string{"scope": "read"}))
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		var req authv3.CheckRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		r, err := resource(&req)
		unknown := false
		for k := range req.GetAttributes().GetContextExtensions() {
			unknown = unknown || k != ExtensionAudience && k != ExtensionScope
		}
		if unknown != errors.Is(err, ErrExtension) {
			t.Fatalf("extensions %v: %v", req.GetAttributes().GetContextExtensions(), err)
		}
		for k := range r.Header {
			if k != "Authorization" && k != "Dpop" {
				t.Fatalf("header %q read", k)
			}
		}
	})
}
