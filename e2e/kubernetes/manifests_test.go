// Package kubernetes holds the test of snowtoken's Kubernetes manifests (a
// Kustomize base and overlays in deploy/kubernetes). It is a module of its
// own, so that k8s.io/api never enters the issuer's go.mod.
package kubernetes

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// objects are the decoded manifests of one rendering, by kind and name.
type objects struct {
	statefulSets    map[string]*appsv1.StatefulSet
	services        map[string]*corev1.Service
	pdbs            map[string]*policyv1.PodDisruptionBudget
	networkPolicies map[string]*networkingv1.NetworkPolicy
	deployments     map[string]*appsv1.Deployment
	serviceAccounts map[string]*corev1.ServiceAccount
	roleBindings    map[string]*rbacv1.ClusterRoleBinding
}

// decode splits a multi-document YAML stream and decodes each document
// strictly into its k8s.io/api type: an unknown or misspelt field, or a key
// given twice, fails.
func decode(tb testing.TB, name string, stream []byte) objects {
	tb.Helper()
	o := objects{map[string]*appsv1.StatefulSet{}, map[string]*corev1.Service{},
		map[string]*policyv1.PodDisruptionBudget{}, map[string]*networkingv1.NetworkPolicy{},
		map[string]*appsv1.Deployment{}, map[string]*corev1.ServiceAccount{}, map[string]*rbacv1.ClusterRoleBinding{}}
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			tb.Fatalf("%s, document %d: %v", name, i, err)
		}
		var target any
		switch meta.Kind {
		case "StatefulSet":
			v := &appsv1.StatefulSet{}
			o.statefulSets[meta.Metadata.Name], target = v, v
		case "Service":
			v := &corev1.Service{}
			o.services[meta.Metadata.Name], target = v, v
		case "PodDisruptionBudget":
			v := &policyv1.PodDisruptionBudget{}
			o.pdbs[meta.Metadata.Name], target = v, v
		case "NetworkPolicy":
			v := &networkingv1.NetworkPolicy{}
			o.networkPolicies[meta.Metadata.Name], target = v, v
		case "Deployment":
			v := &appsv1.Deployment{}
			o.deployments[meta.Metadata.Name], target = v, v
		case "ServiceAccount":
			v := &corev1.ServiceAccount{}
			o.serviceAccounts[meta.Metadata.Name], target = v, v
		case "ClusterRoleBinding":
			v := &rbacv1.ClusterRoleBinding{}
			o.roleBindings[meta.Metadata.Name], target = v, v
		default:
			tb.Fatalf("%s, document %d: kind %q has no check here", name, i, meta.Kind)
		}
		strictDecode(tb, name+", "+meta.Kind+" "+meta.Metadata.Name, []byte(doc), target)
	}
	return o
}

// base decodes every file of base/ that kustomization.yaml lists.
func base(tb testing.TB) objects {
	tb.Helper()
	var all bytes.Buffer
	k, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	var kust struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(k, &kust); err != nil {
		tb.Fatal(err)
	}
	files, _ := filepath.Glob("base/*.yaml")
	for _, f := range files {
		if f != "base/kustomization.yaml" && !slices.Contains(kust.Resources, filepath.Base(f)) {
			tb.Errorf("%s is not in base/kustomization.yaml: it would never be applied", f)
		}
	}
	for _, r := range kust.Resources {
		b, err := os.ReadFile(filepath.Join("base", r))
		if err != nil {
			tb.Fatal(err)
		}
		all.WriteString("---\n")
		all.Write(b)
	}
	return decode(tb, "base", all.Bytes())
}

// envRequireKubectl makes a missing kubectl, or one whose kustomize is too
// old for the manifests, a failure instead of a skip; CI sets it.
const envRequireKubectl = "SNOWTOKEN_TEST_REQUIRE_KUBECTL"

// kustomizeProbe is a kustomization with what the base and the overlays use
// (labels without selectors, patches by target): a kubectl whose built-in
// kustomize cannot render it is present but not enough.
var kustomizeProbe = map[string]string{
	"kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
labels:
  - pairs:
      probe: "yes"
    includeSelectors: false
resources:
  - cm.yaml
patches:
  - target:
      kind: ConfigMap
      name: probe
    patch: |-
      - op: replace
        path: /data/k
        value: patched
`,
	"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n  k: v\n",
}

// requireKubectl skips the test unless kubectl is here with a kustomize that
// renders kustomizeProbe; under envRequireKubectl it fails instead.
func requireKubectl(tb testing.TB) {
	tb.Helper()
	missing := func(why string) {
		tb.Helper()
		if os.Getenv(envRequireKubectl) == "1" {
			tb.Fatalf("%s, and %s=1", why, envRequireKubectl)
		}
		tb.Skipf("%s (set %s=1 to make this a failure)", why, envRequireKubectl)
	}
	if _, err := exec.LookPath("kubectl"); err != nil {
		missing("needs kubectl (kubectl kustomize), which is not on PATH")
	}
	dir := tb.TempDir()
	for name, text := range kustomizeProbe {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	out, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "probe: \"yes\"") || !strings.Contains(string(out), "k: patched") {
		version, _ := exec.Command("kubectl", "version", "--client").CombinedOutput()
		missing(fmt.Sprintf("this kubectl's kustomize cannot render labels and targeted patches (%v: %s); %s",
			err, bytes.TrimSpace(out), bytes.TrimSpace(version)))
	}
}

// kustomize renders an overlay with kubectl kustomize (see requireKubectl).
func kustomize(tb testing.TB, dir string) objects {
	tb.Helper()
	requireKubectl(tb)
	out, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
	if err != nil {
		tb.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return decode(tb, dir, out)
}

// knownVars reads the SNOWTOKEN_* names of config.Vars from its source:
// importing the issuer's module would bring its dependencies here.
func knownVars(tb testing.TB) map[string]bool {
	tb.Helper()
	src, err := os.ReadFile("../../config/config.go")
	if err != nil {
		tb.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{"(SNOWTOKEN_[A-Z0-9_]+)",`).FindAllSubmatch(src, -1) {
		names[string(m[1])] = true
	}
	if len(names) < 10 {
		tb.Fatalf("found %d variables in config.Vars: the pattern no longer matches", len(names))
	}
	return names
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// checkIssuer checks the invariants of the issuer StatefulSet.
func checkIssuer(t *testing.T, o objects) {
	t.Helper()
	ss := o.statefulSets["snowtoken"]
	if ss == nil {
		t.Fatal("no StatefulSet snowtoken")
	}
	pod := ss.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("issuer pod has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	known := knownVars(t)
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "SNOWTOKEN_") && !known[e.Name] {
			t.Errorf("env %s is not in config.Vars: the issuer would refuse to start", e.Name)
		}
	}
	// The worker ID is the pod ordinal, strictly leased.
	w := env(c, "SNOWTOKEN_WORKER_ID")
	if w == nil || w.ValueFrom == nil || w.ValueFrom.FieldRef == nil ||
		w.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']" {
		t.Errorf("SNOWTOKEN_WORKER_ID = %+v, want the pod-index label through the downward API", w)
	}
	if s := env(c, "SNOWTOKEN_WORKER_ID_STRICT"); s == nil || s.Value != "true" {
		t.Error("SNOWTOKEN_WORKER_ID_STRICT is not true: a taken ordinal would silently take another worker ID")
	}
	if e := env(c, "SNOWTOKEN_ENV"); e == nil || e.Value != "production" {
		t.Error("SNOWTOKEN_ENV is not production")
	}
	// Probes.
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe %+v, want GET /readyz", p)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz", p)
	}
	// The grace period covers the drain and the 15 s of in-flight requests.
	drain := 1 * time.Second
	if d := env(c, "SNOWTOKEN_SHUTDOWN_DRAIN"); d != nil {
		var err error
		if drain, err = time.ParseDuration(d.Value); err != nil {
			t.Fatal(err)
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < drain+15*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v, want at least the drain %v plus 15 s", g, drain)
	}
	// Secrets are files, mounted read-only, and every file variable points into one.
	secretMounts := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				if !m.ReadOnly {
					t.Errorf("secret volume %s is mounted read-write", v.Name)
				}
				secretMounts[m.MountPath] = true
			}
		}
	}
	for _, name := range []string{"SNOWTOKEN_SIGNING_KEYS", "SNOWTOKEN_CLIENTS_FILE", "SNOWTOKEN_REDIS_PASSWORD_FILE"} {
		e := env(c, name)
		if e == nil || !secretMounts[filepath.Dir(e.Value)] {
			t.Errorf("%s = %+v: want a file in a mounted Secret", name, e)
		}
	}
	checkHardened(t, "issuer", pod, c)
	if pdb := o.pdbs["snowtoken"]; pdb == nil || pdb.Spec.Selector == nil ||
		pdb.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "issuer" {
		t.Error("no PodDisruptionBudget for the issuer")
	}
	if np := o.networkPolicies["snowtoken-issuer"]; np == nil || len(np.Spec.Ingress) == 0 {
		t.Error("no NetworkPolicy limiting who reaches the issuer")
	}
	if s := o.services["snowtoken"]; s == nil || s.Spec.Selector["app.kubernetes.io/component"] != "issuer" {
		t.Error("no Service selecting the issuer")
	}
}

// checkHardened checks limits and the security context of a pod's container.
func checkHardened(t *testing.T, what string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("%s: no %s request", what, r)
		}
		if _, ok := c.Resources.Limits[r]; !ok {
			t.Errorf("%s: no %s limit", what, r)
		}
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: not runAsNonRoot", what)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("%s: security context %+v, want a read-only root, no privilege escalation, all capabilities dropped", what, sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token it does not need", what)
	}
	if strings.HasSuffix(c.Image, ":latest") || !strings.Contains(c.Image, ":") {
		t.Errorf("%s: image %q is not pinned to a version", what, c.Image)
	}
}

// checkRedis checks the bundled Redis: the settings the promises need, and
// that only the issuer reaches it.
func checkRedis(t *testing.T, o objects) {
	t.Helper()
	ss := o.statefulSets["snowtoken-redis"]
	if ss == nil {
		t.Fatal("no StatefulSet snowtoken-redis")
	}
	c := ss.Spec.Template.Spec.Containers[0]
	cmd := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
	for _, want := range []string{"--appendonly yes", "--appendfsync everysec", "--maxmemory-policy noeviction", "--maxmemory ", "--requirepass"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("redis command %q lacks %q (docs/redis.md)", cmd, want)
		}
	}
	if len(ss.Spec.VolumeClaimTemplates) == 0 {
		t.Error("redis has no persistent volume: a restart would lose every revocation")
	}
	checkHardened(t, "redis", ss.Spec.Template.Spec, c)
	np := o.networkPolicies["snowtoken-redis"]
	if np == nil || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 ||
		np.Spec.Ingress[0].From[0].PodSelector == nil ||
		np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/component"] != "issuer" {
		t.Errorf("redis NetworkPolicy %+v: want ingress from the issuer only", np)
	}
}

// TestMain runs the tests in deploy/kubernetes, the manifests they check:
// their files are read by their relative names.
func TestMain(m *testing.M) {
	if err := os.Chdir(filepath.Join("..", "..", "deploy", "kubernetes")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func TestBase(t *testing.T) {
	o := base(t)
	checkIssuer(t, o)
	checkRedis(t, o)
}

func TestOverlayProduction(t *testing.T) {
	o := kustomize(t, "overlays/production")
	checkIssuer(t, o)
	checkRedis(t, o)
	ss := o.statefulSets["snowtoken"]
	if ss.Namespace != "snowtoken" {
		t.Errorf("namespace %q, want snowtoken", ss.Namespace)
	}
	if r := ss.Spec.Replicas; r == nil || *r != 5 {
		t.Errorf("replicas %v, want 5", r)
	}
	c := ss.Spec.Template.Spec.Containers[0]
	if e := env(c, "SNOWTOKEN_ISSUER"); e == nil || !strings.HasPrefix(e.Value, "https://") {
		t.Errorf("SNOWTOKEN_ISSUER = %+v: the patch by index missed it", e)
	}
}

func TestOverlayManagedRedis(t *testing.T) {
	o := kustomize(t, "overlays/managed-redis")
	checkIssuer(t, o)
	for _, name := range []string{"snowtoken-redis"} {
		if o.statefulSets[name] != nil || o.services[name] != nil || o.networkPolicies[name] != nil {
			t.Errorf("the bundled %s is still there", name)
		}
	}
	c := o.statefulSets["snowtoken"].Spec.Template.Spec.Containers[0]
	if e := env(c, "SNOWTOKEN_REDIS_URL"); e == nil || !strings.HasPrefix(e.Value, "rediss://") {
		t.Errorf("SNOWTOKEN_REDIS_URL = %s: want the managed Redis over TLS (the patch by index missed it?)", fmt.Sprint(e))
	}
}

// TestOverlayWorkloads: the production overlay with a workload that gets
// DPoP-bound tokens with no secret (its projected service-account token,
// for the issuer's URL alone) and a service that checks them; the issuer
// may read the cluster's keys and nothing else.
func TestOverlayWorkloads(t *testing.T) {
	o := kustomize(t, "overlays/workloads")
	checkIssuer(t, o)
	checkRedis(t, o)
	ss := o.statefulSets["snowtoken"]
	ic := ss.Spec.Template.Spec.Containers[0]
	issuer := env(ic, "SNOWTOKEN_ISSUER")
	if issuer == nil || !strings.HasPrefix(issuer.Value, "https://") {
		t.Fatalf("SNOWTOKEN_ISSUER = %+v", issuer)
	}

	// The issuer's identity towards the API server: a projected token and the CA.
	if ss.Spec.Template.Spec.ServiceAccountName != "snowtoken" || o.serviceAccounts["snowtoken"] == nil {
		t.Errorf("the issuer runs as service account %q; want snowtoken, declared", ss.Spec.Template.Spec.ServiceAccountName)
	}
	if !projects(ss.Spec.Template.Spec, ic, "/run/secrets/kubernetes", "", true) {
		t.Error("the issuer has no projected API-server token and cluster CA at /run/secrets/kubernetes")
	}
	// kubernetes.default.svc is a Service address: private, which the
	// issuer fetches keys from only through the allow-list.
	if n := env(ic, "SNOWTOKEN_KEY_FETCH_ALLOW_NETS"); n == nil || n.Value == "" {
		t.Error("SNOWTOKEN_KEY_FETCH_ALLOW_NETS is not set: the issuer would refuse to fetch the cluster's keys from kubernetes.default.svc, a Service (private) address")
	}
	crb := o.roleBindings["snowtoken-service-account-issuer-discovery"]
	if crb == nil || crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != "system:service-account-issuer-discovery" ||
		len(crb.Subjects) != 1 || crb.Subjects[0].Kind != "ServiceAccount" || crb.Subjects[0].Name != "snowtoken" || crb.Subjects[0].Namespace != ss.Namespace {
		t.Errorf("ClusterRoleBinding %+v: want system:service-account-issuer-discovery for snowtoken/snowtoken alone", crb)
	}
	if len(o.roleBindings) != 1 {
		t.Errorf("%d ClusterRoleBindings, want the one", len(o.roleBindings))
	}

	// The caller: no secret, a token for the issuer's URL alone.
	caller := o.deployments["orders-caller"]
	if caller == nil {
		t.Fatal("no Deployment orders-caller")
	}
	pod := caller.Spec.Template.Spec
	cc := pod.Containers[0]
	checkHardened(t, "orders-caller", pod, cc)
	for _, v := range pod.Volumes {
		if v.Secret != nil || v.Projected != nil && slices.ContainsFunc(v.Projected.Sources, func(p corev1.VolumeProjection) bool { return p.Secret != nil }) {
			t.Errorf("orders-caller mounts a Secret (%s): it should need none", v.Name)
		}
	}
	for _, e := range cc.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil || strings.Contains(e.Name, "SECRET") {
			t.Errorf("orders-caller has a secret in its environment: %s", e.Name)
		}
	}
	if pod.ServiceAccountName != "orders-caller" || o.serviceAccounts["orders-caller"] == nil {
		t.Errorf("orders-caller runs as %q; want its own service account, declared", pod.ServiceAccountName)
	}
	tokenFile := env(cc, "CALL_TOKEN_FILE")
	if tokenFile == nil || !projects(pod, cc, filepath.Dir(tokenFile.Value), issuer.Value, false) {
		t.Errorf("CALL_TOKEN_FILE %+v is not a projected service-account token whose audience is %s", tokenFile, issuer.Value)
	}
	if !slices.Equal(cc.Args, []string{"call"}) || env(cc, "CALL_CLIENT_ID") == nil {
		t.Errorf("orders-caller runs %q with CALL_CLIENT_ID %+v; want `consumer call` as a client", cc.Args, env(cc, "CALL_CLIENT_ID"))
	}
	if u := env(cc, "SNOWTOKEN_ISSUER_URL"); u == nil || u.Value != issuer.Value {
		t.Errorf("orders-caller asks %+v for tokens; its DPoP proofs must name the issuer's public URL %s", u, issuer.Value)
	}

	// orders: checks DPoP-bound tokens at the URL the caller calls.
	orders := o.deployments["orders"]
	if orders == nil {
		t.Fatal("no Deployment orders")
	}
	oc := orders.Spec.Template.Spec.Containers[0]
	checkHardened(t, "orders", orders.Spec.Template.Spec, oc)
	public, target := env(oc, "CONSUMER_PUBLIC_URL"), env(cc, "CALL_URL")
	if public == nil || target == nil || !strings.HasPrefix(target.Value, strings.TrimRight(public.Value, "/")+"/") {
		t.Errorf("orders' CONSUMER_PUBLIC_URL %+v is not the origin of the caller's CALL_URL %+v: the proofs would name another URL", public, target)
	}
	if s := o.services["orders"]; s == nil || s.Spec.Selector["app.kubernetes.io/name"] != "orders" {
		t.Error("no Service orders")
	}
	for _, d := range []*appsv1.Deployment{caller, orders} {
		if d.Spec.Template.Labels["snowtoken.io/client"] != "true" {
			t.Errorf("%s is not labelled snowtoken.io/client: the issuer's NetworkPolicy keeps it out", d.Name)
		}
	}
	// orders validates in Remote mode, which forwards the original request:
	// the issuer believes it from the pod network (SNOWTOKEN_DPOP_FORWARDERS),
	// which must not be a trusted proxy too, or any pod there could name
	// any client's address and escape the failed-authentication limit.
	fwd := env(ic, "SNOWTOKEN_DPOP_FORWARDERS")
	if fwd == nil || fwd.Value == "" || fwd.Value == "none" {
		t.Error("SNOWTOKEN_DPOP_FORWARDERS is not set: the issuer would check every proof orders forwards against its own URL")
	}
	if tp := env(ic, "SNOWTOKEN_TRUSTED_PROXIES"); tp != nil && fwd != nil {
		for _, a := range prefixes(t, tp.Value) {
			for _, b := range prefixes(t, fwd.Value) {
				if a.Overlaps(b) {
					t.Errorf("SNOWTOKEN_TRUSTED_PROXIES %q overlaps SNOWTOKEN_DPOP_FORWARDERS %q: a pod that forwards proofs would name clients' addresses too", tp.Value, fwd.Value)
				}
			}
		}
	}
}

// prefixes reads a comma-separated list of addresses and CIDRs.
func prefixes(tb testing.TB, list string) []netip.Prefix {
	tb.Helper()
	var out []netip.Prefix
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimSpace(v)
		p, err := netip.ParsePrefix(v)
		if a, aerr := netip.ParseAddr(v); aerr == nil {
			p, err = a.Prefix(a.BitLen())
		}
		if err != nil {
			tb.Fatalf("%q is neither an address nor a CIDR: %v", v, err)
		}
		out = append(out, p)
	}
	return out
}

// projects reports whether pod mounts at dir, in container c, read-only, a
// projected volume with a service-account token whose audience is audience
// ("" for the API server's), and with withCA the cluster's CA as well.
func projects(pod corev1.PodSpec, c corev1.Container, dir, audience string, withCA bool) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != dir || !m.ReadOnly {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			token, ca := false, false
			for _, src := range v.Projected.Sources {
				if sa := src.ServiceAccountToken; sa != nil && sa.Audience == audience && sa.Path == "token" {
					token = true
				}
				if cm := src.ConfigMap; cm != nil && cm.Name == "kube-root-ca.crt" {
					ca = true
				}
			}
			return token && (ca || !withCA)
		}
	}
	return false
}
