package kubernetes

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The Prometheus Operator component (components/monitoring): its objects are
// decoded strictly into the Operator's own Go types (the module
// github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring),
// which checks the types' field names and value types, and admitted against
// the Operator's CRDs of the same version as an API server admits them
// (crd_test.go: the openAPIV3Schema's required fields, enums, patterns and
// bounds, an unknown field refused); the checks below say how the objects
// fit together.

var update = flag.Bool("update", false, "write components/monitoring/prometheusrule.yaml from deploy/prometheus/snowtoken-rules.yml")

const (
	rulesFile          = "../prometheus/snowtoken-rules.yml"
	prometheusRuleFile = "components/monitoring/prometheusrule.yaml"
)

// prometheusRuleHeader starts prometheusrule.yaml; the rules file follows,
// indented under spec.
const prometheusRuleHeader = `# GENERATED from deploy/prometheus/snowtoken-rules.yml, the one source of
# truth of snowtoken's rules: edit that file, then write this one again with
#   cd e2e/kubernetes && go test -run TestPrometheusRuleIsTheRulesFile -update
# (the test fails while they differ).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: snowtoken
  labels:
    app.kubernetes.io/name: snowtoken
spec:
`

// prometheusRuleYAML is prometheusrule.yaml as the rules file makes it.
func prometheusRuleYAML(tb testing.TB) []byte {
	tb.Helper()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(prometheusRuleHeader)
	for line := range strings.Lines(string(rules)) {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	return b.Bytes()
}

// TestPrometheusRuleIsTheRulesFile: the component's PrometheusRule is the
// rules file under spec, line for line, and decodes into the same
// monitoringv1.PrometheusRuleSpec as the rules file does on its own.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	want := prometheusRuleYAML(t)
	if *update {
		if err := os.WriteFile(prometheusRuleFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(prometheusRuleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not %s under spec: run go test -run TestPrometheusRuleIsTheRulesFile -update in e2e/kubernetes", prometheusRuleFile, rulesFile)
	}
	var rule monitoringv1.PrometheusRule
	strictDecode(t, prometheusRuleFile, got, &rule)
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	strictDecode(t, rulesFile, rules, &spec)
	if !equality.Semantic.DeepEqual(rule.Spec, spec) {
		t.Errorf("the PrometheusRule's spec decodes apart from the rules file")
	}
	if len(spec.Groups) == 0 {
		t.Fatal("no rule groups")
	}
}

// strictDecode decodes one YAML document as the API server does: YAML to
// JSON refusing duplicate keys, then JSON with case-sensitive names, unknown
// fields refused (Go's encoding/json would take "readonly" for "readOnly")
// and values of the wrong type failing.
func strictDecode(tb testing.TB, name string, doc []byte, into any) {
	tb.Helper()
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	strict, err := kjson.UnmarshalStrict(js, into)
	if err = errors.Join(append(strict, err)...); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
}

// TestComponentMonitoring renders the production overlay with the
// component, as an operator adds it, and checks that the pieces meet: the
// issuer's metrics listener on the pod network with a named port, a
// headless Service that selects the issuer pods on that port, a
// ServiceMonitor that selects the Service by its labels and scrapes that
// port within its interval and above the 1 s INFO of a scrape, a
// NetworkPolicy that lets only Prometheus in on it, and the PrometheusRule,
// all in the overlay's namespace; the base's promises (checkIssuer) and the
// overlay's patches by index still hold.
func TestComponentMonitoring(t *testing.T) {
	requireKubectl(t)
	out := renderMonitoring(t)
	var (
		rest     bytes.Buffer
		monitors []*monitoringv1.ServiceMonitor
		rules    []*monitoringv1.PrometheusRule
	)
	for _, doc := range yamlDocuments(out) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ServiceMonitor":
			sm := &monitoringv1.ServiceMonitor{}
			strictDecode(t, "ServiceMonitor", []byte(doc), sm)
			monitors = append(monitors, sm)
		case "PrometheusRule":
			pr := &monitoringv1.PrometheusRule{}
			strictDecode(t, "PrometheusRule", []byte(doc), pr)
			rules = append(rules, pr)
		default:
			rest.WriteString("---\n" + doc)
		}
	}
	o := decode(t, "production + components/monitoring", rest.Bytes())
	checkIssuer(t, o)
	checkRedis(t, o)
	if len(monitors) != 1 || len(rules) != 1 {
		t.Fatalf("%d ServiceMonitors and %d PrometheusRules, want one each", len(monitors), len(rules))
	}
	sm, pr := monitors[0], rules[0]
	admitAll(t, monitoringObjects(t, out))

	ss := o.statefulSets["snowtoken"]
	c := ss.Spec.Template.Spec.Containers[0]
	if e := env(c, "SNOWTOKEN_ISSUER"); e == nil || !strings.HasPrefix(e.Value, "https://") {
		t.Errorf("SNOWTOKEN_ISSUER = %+v: the overlay's patch by index missed it once the component appended", e)
	}
	if e := env(c, "SNOWTOKEN_METRICS_ADDR"); e == nil || e.Value != ":9464" {
		t.Errorf("SNOWTOKEN_METRICS_ADDR = %+v, want :9464 (the default, loopback, cannot be scraped)", e)
	}
	var metricsPort int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort != 9464 {
		t.Errorf("the issuer container has no port metrics on 9464 (got %d)", metricsPort)
	}

	svc := o.services["snowtoken-metrics"]
	if svc == nil {
		t.Fatal("no Service snowtoken-metrics")
	}
	if svc.Spec.ClusterIP != "None" {
		t.Errorf("Service snowtoken-metrics: clusterIP %q, want None: every pod scraped, not one behind a balancer", svc.Spec.ClusterIP)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ss.Spec.Template.Labels)) {
		t.Errorf("Service snowtoken-metrics selects %v, which the issuer pods (%v) are not", svc.Spec.Selector, ss.Spec.Template.Labels)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "metrics" || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("Service snowtoken-metrics ports %+v, want one named metrics to the container port metrics", svc.Spec.Ports)
	}

	sel, err := metav1LabelSelector(sm)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor selects %v, which Service snowtoken-metrics (%v) is not", sm.Spec.Selector, svc.Labels)
	}
	for name, other := range o.services {
		if name != svc.Name && sel.Matches(labels.Set(other.Labels)) {
			t.Errorf("the ServiceMonitor also selects Service %s: its pods would be scraped twice", name)
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "metrics" || ep.Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoint port %q path %q, want metrics and /metrics", ep.Port, ep.Path)
	}
	interval, err1 := time.ParseDuration(string(ep.Interval))
	timeout, err2 := time.ParseDuration(string(ep.ScrapeTimeout))
	if err1 != nil || err2 != nil || timeout < 2*time.Second || timeout > interval {
		t.Errorf("ServiceMonitor interval %q, scrapeTimeout %q: want a timeout of 2 s or more (a scrape waits up to 1 s for Redis's INFO), within the interval", ep.Interval, ep.ScrapeTimeout)
	}

	np := o.networkPolicies["snowtoken-issuer-metrics"]
	if np == nil {
		t.Fatal("no NetworkPolicy snowtoken-issuer-metrics: the issuer's policy admits only snowtoken.io/client pods")
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.String() != "metrics" ||
		len(np.Spec.Ingress[0].From) == 0 {
		t.Errorf("NetworkPolicy snowtoken-issuer-metrics: ingress %+v, want from Prometheus to the port metrics only", np.Spec.Ingress)
	}

	for what, ns := range map[string]string{"ServiceMonitor": sm.Namespace, "PrometheusRule": pr.Namespace,
		"Service snowtoken-metrics": svc.Namespace, "NetworkPolicy": np.Namespace} {
		if ns != ss.Namespace {
			t.Errorf("%s in namespace %q, want the issuer's %q", what, ns, ss.Namespace)
		}
	}
	var spec monitoringv1.PrometheusRuleSpec
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	strictDecode(t, rulesFile, data, &spec)
	if !equality.Semantic.DeepEqual(pr.Spec, spec) {
		t.Error("the rendered PrometheusRule's groups are not the rules file's")
	}
}

// renderMonitoring renders the production overlay with the component, as
// an operator adds it (see requireKubectl).
func renderMonitoring(tb testing.TB) []byte {
	tb.Helper()
	return renderComponent(tb, "monitoring")
}

// renderComponent renders the production overlay with the component name
// (components/name), as an operator adds it (see requireKubectl).
func renderComponent(tb testing.TB, name string) []byte {
	tb.Helper()
	root, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	// An overlay of the operator's: production's, with the component
	// (kustomize takes relative paths only).
	dir := tb.TempDir()
	rel, err := filepath.Rel(dir, root)
	if err != nil {
		tb.Fatal(err)
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: snowtoken\nresources:\n  - " +
		filepath.Join(rel, "overlays", "production") + "\ncomponents:\n  - " + filepath.Join(rel, "components", name) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
	if err != nil {
		tb.Fatalf("kubectl kustomize (production + components/%s): %v\n%s", name, err, out)
	}
	return out
}

// yamlDocuments splits a kustomize output into its documents.
func yamlDocuments(out []byte) []string {
	return regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1)
}

// monitoringObjects is each ServiceMonitor and PrometheusRule document of
// a rendering by its kind; a kind twice fails.
func monitoringObjects(tb testing.TB, out []byte) map[string][]byte {
	tb.Helper()
	docs := map[string][]byte{}
	for _, doc := range yamlDocuments(out) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			tb.Fatal(err)
		}
		if _, ok := crdOfKind[meta.Kind]; !ok {
			continue
		}
		if _, twice := docs[meta.Kind]; twice {
			tb.Fatalf("two %ss rendered", meta.Kind)
		}
		docs[meta.Kind] = []byte(doc)
	}
	return docs
}

// metav1LabelSelector is the ServiceMonitor's selector as a labels.Selector.
func metav1LabelSelector(sm *monitoringv1.ServiceMonitor) (labels.Selector, error) {
	if len(sm.Spec.Selector.MatchExpressions) > 0 {
		return nil, errors.New("the ServiceMonitor selects by expressions: check by labels only")
	}
	return labels.SelectorFromSet(sm.Spec.Selector.MatchLabels), nil
}
