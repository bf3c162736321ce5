package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Prometheus Operator's CRDs, as an API server admits a custom resource
// against them. testdata/crds holds the two the monitoring component's
// objects are of, at the version of the Go types go.mod requires; how they
// are made, and checked to be made so, is testdata/crds/generate.sh. An
// object goes through what the API server does to a create with
// fieldValidation=Strict (k8s.io/apiextensions-apiserver, at go.mod's
// version, its handler and its registry's strategy):
//
//	decode ──▶ prune by the structural schema ──▶ default ──▶ validate
//	            (a field the schema has not:       (schema      (ObjectMeta, the
//	             refused, as Strict does)           defaults)    openAPIV3Schema:
//	                                                             types, required,
//	                                                             enums, patterns,
//	                                                             bounds; embedded
//	                                                             resources; list
//	                                                             sets and maps)
//
// CEL rules (x-kubernetes-validations) are not applied here: a CRD with one
// fails loadCRD, so that a future CRD cannot pass for checked.

// crdDir is testdata/crds from deploy/kubernetes, where TestMain runs.
var crdDir = filepath.Join("..", "..", "e2e", "kubernetes", "testdata", "crds")

// operatorTypesModule is the module whose Go types the component's objects
// decode into; the CRDs must be of its version.
const operatorTypesModule = "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring"

// crdOfKind is the CRD (its plural) of each kind the component renders.
var crdOfKind = map[string]string{"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}

// crdSchema is one CRD version as the API server serves it.
type crdSchema struct {
	group, version, kind string
	namespaced           bool
	structural           *structuralschema.Structural
	validator            validation.SchemaValidator
}

// loadCRD reads testdata/crds/monitoring.coreos.com_<plural>.yaml strictly
// and builds its served version's schema as the API server does: the
// structural schema (refused if not structural), its defaults pruned, and
// the OpenAPI validator of its openAPIV3Schema.
func loadCRD(tb testing.TB, plural string) (*crdSchema, *apiextensionsv1.CustomResourceDefinition) {
	tb.Helper()
	name := filepath.Join(crdDir, "monitoring.coreos.com_"+plural+".yaml")
	data, err := os.ReadFile(name)
	if err != nil {
		tb.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	strictDecode(tb, name, data, &crd)
	var served []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v)
		}
	}
	if len(served) != 1 || served[0].Schema == nil || served[0].Schema.OpenAPIV3Schema == nil {
		tb.Fatalf("%s: want one served version with an openAPIV3Schema, have %d", name, len(served))
	}
	var internal apiextensions.CustomResourceValidation
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(served[0].Schema, &internal, nil); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	if errs := structuralschema.ValidateStructural(nil, s); len(errs) > 0 {
		tb.Fatalf("%s: not a structural schema: %v", name, errs.ToAggregate())
	}
	if path := celRule(s, "openAPIV3Schema"); path != "" {
		tb.Fatalf("%s: %s has CEL rules (x-kubernetes-validations), which this check does not apply", name, path)
	}
	s = s.DeepCopy()
	if err := defaulting.PruneDefaults(s); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	validator, _, err := validation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return &crdSchema{
		group:      crd.Spec.Group,
		version:    served[0].Name,
		kind:       crd.Spec.Names.Kind,
		namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		structural: s,
		validator:  validator,
	}, &crd
}

// celRule is the path of the first schema under s with CEL rules, or "".
func celRule(s *structuralschema.Structural, path string) string {
	if s == nil {
		return ""
	}
	if len(s.XValidations) > 0 {
		return path
	}
	if p := celRule(s.Items, path+".items"); p != "" {
		return p
	}
	for name, prop := range s.Properties {
		if p := celRule(&prop, path+".properties."+name); p != "" {
			return p
		}
	}
	if s.AdditionalProperties != nil {
		return celRule(s.AdditionalProperties.Structural, path+".additionalProperties")
	}
	return ""
}

// admit is what the API server does to obj (a decoded YAML document, which
// it changes) on a create with fieldValidation=Strict: every refusal, or nil.
func (c *crdSchema) admit(obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	var errs field.ErrorList
	if u.GetKind() != c.kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), "must be "+c.kind))
	}
	if want := c.group + "/" + c.version; u.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), "must be "+want))
	}
	if len(errs) > 0 {
		return errs.ToAggregate()
	}

	// Decoding: the handler's unstructuredSchemaCoercer.
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	meta, found, unknown, err := objectmeta.GetObjectMetaWithOptions(obj, objectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return err
	}
	unknown = append(unknown, pruning.PruneWithOptions(obj, c.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	defaulting.PruneNonNullableNullsWithoutDefaults(obj, c.structural)
	ferr, more := objectmeta.CoerceWithOptions(nil, obj, c.structural, false, objectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		return ferr
	}
	unknown = append(unknown, more...)
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if found {
		if err := objectmeta.SetObjectMeta(obj, meta); err != nil {
			return err
		}
	}
	var refusals []error
	for _, path := range unknown {
		refusals = append(refusals, fmt.Errorf("unknown field %q", path))
	}
	defaulting.Default(obj, c.structural)

	// Validation: the registry's customResourceStrategy.Validate.
	errs = append(errs, apivalidation.ValidateObjectMetaAccessor(u, c.namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
	errs = append(errs, validation.ValidateCustomResource(nil, obj, c.validator)...)
	errs = append(errs, objectmeta.Validate(context.Background(), nil, obj, c.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, obj)...)
	for _, e := range errs {
		refusals = append(refusals, e)
	}
	return errors.Join(refusals...)
}

// TestCRDsAreTheTypesVersion: the CRDs in testdata/crds are of the Operator
// version whose Go types the objects also decode into, the one go.mod
// requires, and are of the kinds the component uses.
func TestCRDsAreTheTypesVersion(t *testing.T) {
	// A test binary records no modules: go.mod says which one it built with.
	gomod, err := os.ReadFile(filepath.Join(crdDir, "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^(?:require)?\s+` + regexp.QuoteMeta(operatorTypesModule) + `\s+(v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("go.mod does not require %s", operatorTypesModule)
	}
	version := string(m[1])
	for kind, plural := range crdOfKind {
		c, crd := loadCRD(t, plural)
		if got := "v" + crd.Annotations["operator.prometheus.io/version"]; got != version {
			t.Errorf("the %s CRD is of the Operator's %s, the Go types of %s: run testdata/crds/generate.sh", plural, got, version)
		}
		if c.group != "monitoring.coreos.com" || c.version != "v1" || c.kind != kind || !c.namespaced {
			t.Errorf("the %s CRD serves %s/%s %s (namespaced %t), want monitoring.coreos.com/v1 %s, namespaced", plural, c.group, c.version, c.kind, c.namespaced, kind)
		}
	}
}

// admitAll admits each object of the rendered component by its kind's CRD.
func admitAll(t *testing.T, docs map[string][]byte) {
	t.Helper()
	for kind, doc := range docs {
		c, _ := loadCRD(t, crdOfKind[kind])
		if err := c.admit(yamlObject(t, kind, doc)); err != nil {
			t.Errorf("the API server would refuse the %s: %v", kind, err)
		}
	}
}

// yamlObject is one YAML document as the API server decodes it.
func yamlObject(tb testing.TB, name string, doc []byte) map[string]any {
	tb.Helper()
	var obj map[string]any
	strictDecode(tb, name, doc, &obj)
	return obj
}

// node is the object at path (map keys and list indices) in obj.
func node(tb testing.TB, obj any, path ...any) map[string]any {
	tb.Helper()
	for _, step := range path {
		switch key := step.(type) {
		case string:
			m, ok := obj.(map[string]any)
			if !ok {
				tb.Fatalf("%v: %q is not under an object", path, key)
			}
			obj = m[key]
		case int:
			l, ok := obj.([]any)
			if !ok || key >= len(l) {
				tb.Fatalf("%v: no item %d", path, key)
			}
			obj = l[key]
		}
	}
	m, ok := obj.(map[string]any)
	if !ok {
		tb.Fatalf("%v is not an object", path)
	}
	return m
}

// TestCRDsRefuse: the CRD check refuses what an API server refuses, in the
// component's own rendered objects changed one field at a time, and admits
// them unchanged. Strict decoding into the Go types refuses the unknown
// fields too, but lets the enum, the pattern, the required field and the
// bound through.
func TestCRDsRefuse(t *testing.T) {
	requireKubectl(t)
	docs := monitoringObjects(t, renderMonitoring(t))
	if len(docs) != len(crdOfKind) {
		t.Fatalf("rendered %d of the kinds %v", len(docs), crdOfKind)
	}
	admitAll(t, docs)
	endpoint := []any{"spec", "endpoints", 0}
	rule := []any{"spec", "groups", 0, "rules", 0}
	for _, tc := range []struct {
		name, kind string
		mutate     func(tb testing.TB, obj map[string]any)
		want       string // in the refusal
	}{
		{"scheme not in the enum", "ServiceMonitor", func(tb testing.TB, obj map[string]any) {
			node(tb, obj, endpoint...)["scheme"] = "htp"
		}, `spec.endpoints[0].scheme: Unsupported value: "htp"`},
		{"interval not a duration", "ServiceMonitor", func(tb testing.TB, obj map[string]any) {
			node(tb, obj, endpoint...)["interval"] = "30 seconds"
		}, `spec.endpoints[0].interval in body should match`},
		{"unknown field in an endpoint", "ServiceMonitor", func(tb testing.TB, obj map[string]any) {
			node(tb, obj, endpoint...)["scrapeTimout"] = "5s"
		}, `unknown field "spec.endpoints[0].scrapeTimout"`},
		{"rule without expr", "PrometheusRule", func(tb testing.TB, obj map[string]any) {
			delete(node(tb, obj, rule...), "expr")
		}, `spec.groups[0].rules[0].expr: Required value`},
		{"group without name", "PrometheusRule", func(tb testing.TB, obj map[string]any) {
			node(tb, obj, "spec", "groups", 0)["name"] = ""
		}, `spec.groups[0].name in body should be at least 1 chars long`},
		{"unknown field in the spec", "PrometheusRule", func(tb testing.TB, obj map[string]any) {
			node(tb, obj, "spec")["group"] = []any{}
		}, `unknown field "spec.group"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, ok := docs[tc.kind]
			if !ok {
				t.Fatalf("no %s rendered", tc.kind)
			}
			c, _ := loadCRD(t, crdOfKind[tc.kind])
			obj := yamlObject(t, tc.kind, doc)
			tc.mutate(t, obj)
			err := c.admit(obj)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("admit = %v, want a refusal with %s", err, tc.want)
			}
		})
	}
}
