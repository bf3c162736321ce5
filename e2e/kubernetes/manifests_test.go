// Package kubernetes holds the test of snowtoken's Kubernetes manifests (a
// Kustomize base and overlays in deploy/kubernetes). It is a module of its
// own, so that k8s.io/api never enters the issuer's go.mod.
package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
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
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// objects are the decoded manifests of one rendering, by kind and name.
type objects struct {
	statefulSets    map[string]*appsv1.StatefulSet
	services        map[string]*corev1.Service
	pdbs            map[string]*policyv1.PodDisruptionBudget
	networkPolicies map[string]*networkingv1.NetworkPolicy
}

// decode splits a multi-document YAML stream and decodes each document
// strictly into its k8s.io/api type: an unknown or misspelt field, or a key
// given twice, fails.
func decode(tb testing.TB, name string, stream []byte) objects {
	tb.Helper()
	o := objects{map[string]*appsv1.StatefulSet{}, map[string]*corev1.Service{},
		map[string]*policyv1.PodDisruptionBudget{}, map[string]*networkingv1.NetworkPolicy{}}
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
		default:
			tb.Fatalf("%s, document %d: kind %q has no check here", name, i, meta.Kind)
		}
		// YAML to JSON refusing duplicate keys, then JSON decoded as the API
		// server does: case-sensitive names, unknown fields refused (Go's
		// encoding/json would take "readonly" for "readOnly").
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			tb.Fatalf("%s, %s %s: %v", name, meta.Kind, meta.Metadata.Name, err)
		}
		strict, err := kjson.UnmarshalStrict(js, target)
		if err = errors.Join(append(strict, err)...); err != nil {
			tb.Fatalf("%s, %s %s: %v", name, meta.Kind, meta.Metadata.Name, err)
		}
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
