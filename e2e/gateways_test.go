package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/goccy/go-yaml"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The gateway configurations of deploy/ and docs/gateways.md, checked as
// far as this machine can: it has no Envoy binary (Debian packages none)
// and no Kubernetes API server with Istio's, Envoy Gateway's or Contour's
// CRDs, so the Envoy bootstrap is parsed as Envoy parses it and the
// custom resources are checked for their structure and their agreement
// with the ext_authz service (port, keys).

// extAuthzKeys are the context extensions the service accepts
// (package handlers/extauthz).
var extAuthzKeys = []string{"audience", "scope"}

// TestEnvoyBootstrap parses deploy/envoy/envoy.yaml as Envoy does: YAML to
// JSON to the Bootstrap proto, every typed_config resolved to its
// registered type and unknown fields refused, then the protos' validation
// rules (protoc-gen-validate's, which Envoy applies too). Its ext_authz
// filter asks snowtoken's listener over gRPC (HTTP/2), fails closed, sends
// no body, and its route's context extensions are ones the service takes.
func TestEnvoyBootstrap(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "envoy", "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("envoy.yaml is not a Bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	var hcm hcmv3.HttpConnectionManager
	unpack(t, b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig(), &hcm)
	var filter extauthzv3.ExtAuthz
	unpack(t, hcm.GetHttpFilters()[0].GetTypedConfig(), &filter)
	cluster := filter.GetGrpcService().GetEnvoyGrpc().GetClusterName()
	if cluster == "" || filter.GetFailureModeAllow() || filter.GetWithRequestBody() != nil || filter.GetTransportApiVersion().String() != "V3" {
		t.Errorf("ext_authz filter %v: want gRPC, V3, closed, no body", &filter)
	}
	found := false
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == cluster {
			found = c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] != nil
			if port := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(); port != 9191 {
				t.Errorf("cluster %s on port %d, want 9191 (components/extauthz)", cluster, port)
			}
		}
	}
	if !found {
		t.Errorf("no cluster %s speaking HTTP/2", cluster)
	}
	var perRoute extauthzv3.ExtAuthzPerRoute
	unpack(t, hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"], &perRoute)
	ext := perRoute.GetCheckSettings().GetContextExtensions()
	if len(ext) == 0 {
		t.Error("the route sets no context extension: the example should show one")
	}
	for k := range ext {
		if !slices.Contains(extAuthzKeys, k) {
			t.Errorf("context extension %q: the service refuses it", k)
		}
	}
}

// unpack reads a typed_config into its type.
func unpack(tb testing.TB, a *anypb.Any, into proto.Message) {
	tb.Helper()
	if a == nil {
		tb.Fatal("no typed_config")
	}
	if err := a.UnmarshalTo(into); err != nil {
		tb.Fatalf("%s: %v", a.GetTypeUrl(), err)
	}
}

// TestGatewayResources checks deploy/gateways: each document is one of
// the kinds the docs name, at the API version its project serves; each
// points at components/extauthz's Service and port; none fails open; and
// Contour's context (the check's context extensions) has keys the service
// accepts. Their schemas are not checked: the CRDs are not in testdata.
func TestGatewayResources(t *testing.T) {
	want := map[string][]string{
		"istio.yaml":         {"install.istio.io/v1alpha1 IstioOperator", "security.istio.io/v1 AuthorizationPolicy"},
		"envoy-gateway.yaml": {"gateway.envoyproxy.io/v1alpha1 SecurityPolicy", "gateway.networking.k8s.io/v1beta1 ReferenceGrant"},
		"contour.yaml":       {"projectcontour.io/v1alpha1 ExtensionService", "projectcontour.io/v1 HTTPProxy"},
	}
	for file, kinds := range want {
		raw, err := os.ReadFile(filepath.Join("..", "deploy", "gateways", file))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			var obj map[string]any
			if err := yaml.UnmarshalWithOptions([]byte(doc), &obj, yaml.Strict()); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			got = append(got, fmt.Sprint(obj["apiVersion"], " ", obj["kind"]))
			text := doc
			if strings.Contains(text, "failOpen: true") {
				t.Errorf("%s: fails open", file)
			}
			if obj["kind"] == "HTTPProxy" {
				for _, r := range obj["spec"].(map[string]any)["routes"].([]any) {
					ctx, _ := r.(map[string]any)["authPolicy"].(map[string]any)["context"].(map[string]any)
					for k := range ctx {
						if !slices.Contains(extAuthzKeys, k) {
							t.Errorf("%s: authPolicy.context key %q: the service refuses it", file, k)
						}
					}
				}
			}
		}
		if !slices.Equal(got, kinds) {
			t.Errorf("%s holds %v, want %v", file, got, kinds)
		}
		if !strings.Contains(string(raw), "snowtoken-extauthz") || !strings.Contains(string(raw), "9191") {
			t.Errorf("%s does not name the Service snowtoken-extauthz and port 9191", file)
		}
	}
}
