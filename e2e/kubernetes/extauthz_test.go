package kubernetes

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestComponentExtAuthz: the ext_authz component (components/extauthz)
// added to the production overlay opens the issuers' ext_authz listener on
// the pod network, a Service that names its port for the gateways
// (docs/gateways.md, deploy/gateways name snowtoken-extauthz:9191), and a
// NetworkPolicy that lets the gateways in to that port alone.
func TestComponentExtAuthz(t *testing.T) {
	requireKubectl(t)
	o := decode(t, "production + components/extauthz", renderComponent(t, "extauthz"))
	checkIssuer(t, o)
	checkRedis(t, o)
	ss := o.statefulSets["snowtoken"]
	c := ss.Spec.Template.Spec.Containers[0]
	if e := env(c, "SNOWTOKEN_EXTAUTHZ_ADDR"); e == nil || e.Value != ":9191" {
		t.Errorf("SNOWTOKEN_EXTAUTHZ_ADDR = %+v, want :9191", e)
	}
	if !knownVars(t)["SNOWTOKEN_EXTAUTHZ_ADDR"] {
		t.Error("SNOWTOKEN_EXTAUTHZ_ADDR is not a variable of config.Vars")
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == "grpc-extauthz" {
			port = p.ContainerPort
		}
	}
	if port != 9191 {
		t.Errorf("the issuer container has no port grpc-extauthz on 9191 (got %d)", port)
	}
	svc := o.services["snowtoken-extauthz"]
	if svc == nil {
		t.Fatal("no Service snowtoken-extauthz")
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ss.Spec.Template.Labels)) {
		t.Errorf("Service snowtoken-extauthz selects %v, which the issuer pods (%v) are not", svc.Spec.Selector, ss.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9191 || svc.Spec.Ports[0].TargetPort.String() != "grpc-extauthz" ||
		svc.Spec.Ports[0].AppProtocol == nil || *svc.Spec.Ports[0].AppProtocol != "grpc" {
		t.Errorf("Service snowtoken-extauthz ports %+v, want 9191 to grpc-extauthz, appProtocol grpc", svc.Spec.Ports)
	}
	np := o.networkPolicies["snowtoken-issuer-extauthz"]
	if np == nil {
		t.Fatal("no NetworkPolicy snowtoken-issuer-extauthz: the issuer's policy admits only snowtoken.io/client pods")
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "grpc-extauthz" ||
		len(np.Spec.Ingress[0].From) == 0 {
		t.Errorf("NetworkPolicy snowtoken-issuer-extauthz: ingress %+v, want from the gateways to grpc-extauthz only", np.Spec.Ingress)
	}
	for what, ns := range map[string]string{"Service": svc.Namespace, "NetworkPolicy": np.Namespace} {
		if ns != ss.Namespace {
			t.Errorf("%s in namespace %q, want the issuer's %q", what, ns, ss.Namespace)
		}
	}
}
