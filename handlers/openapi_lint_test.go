package handlers_test

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPILint holds docs/openapi.yaml to Redocly CLI's "recommended"
// ruleset (there is no npm here to run `redocly lint`), rule by rule, by
// Redocly's names:
//
//	struct, spec                        the document is valid OpenAPI 3.0 (kin-openapi's Validate)
//	no-unresolved-refs                  every $ref resolves (kin-openapi's loader)
//	no-invalid-media-type-examples,     examples match their schemas (kin-openapi's Validate)
//	no-invalid-schema-examples
//	no-example-value-and-externalValue  (kin-openapi's Validate)
//	info-license, info-license-url      info.license with a name and a URL
//	no-empty-servers                    at least one server
//	no-server-example.com               no server on localhost or example.com
//	no-server-trailing-slash            no server URL ends in /
//	no-undefined-server-variable        every {variable} of a server URL is defined
//	no-server-variables-empty-enum      no server variable has an empty enum
//	tag-description                     every tag has a description
//	operation-tag-defined               every operation's tags are declared (off in
//	                                    recommended; on here)
//	operation-operationId               every operation has an operationId,
//	operation-operationId-unique        unique,
//	operation-operationId-url-safe      and URL-safe
//	operation-summary                   every operation has a summary
//	operation-2xx-response              every operation has a 2XX response
//	operation-4xx-response              every operation has a 4XX response
//	operation-parameters-unique         no parameter twice (name and in) in an operation
//	path-parameters-defined             every {parameter} of a path is declared and every
//	                                    declared path parameter is in the path
//	                                    (TestOpenAPIOperations and here)
//	path-not-include-query              no ? in a path
//	no-path-trailing-slash              no path ends in /
//	no-identical-paths                  no two paths alike but for parameter names
//	no-ambiguous-paths                  no two paths that one request could match
//	security-defined                    every operation says its security, by schemes
//	                                    that components.securitySchemes defines
//	no-enum-type-mismatch               every enum value has its schema's type
//	no-unused-components                every component is referred to
//
// TestOpenAPIRoutes checks the paths against the gin engine's routes.
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	if err != nil {
		t.Fatalf("no-unresolved-refs: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Errorf("struct: %v", err)
	}
	lintInfo(t, doc)
	lintServers(t, doc)
	lintPaths(t, doc)

	raw := loadOpenAPI(t)
	lintEnums(t, "#", raw)
	lintUnusedComponents(t, raw)
}

func lintInfo(t *testing.T, doc *openapi3.T) {
	t.Helper()
	if l := doc.Info.License; l == nil || l.Name == "" {
		t.Error("info-license: no info.license with a name")
	} else if _, err := url.ParseRequestURI(l.URL); err != nil {
		t.Errorf("info-license-url: license URL %q: %v", l.URL, err)
	}
	for _, tag := range doc.Tags {
		if tag.Description == "" {
			t.Errorf("tag-description: tag %q has none", tag.Name)
		}
	}
}

// serverVar matches a {variable} of a server URL or a path parameter.
var serverVar = regexp.MustCompile(`\{([^}]*)\}`)

func lintServers(t *testing.T, doc *openapi3.T) {
	t.Helper()
	if len(doc.Servers) == 0 {
		t.Error("no-empty-servers: no servers")
	}
	for _, s := range doc.Servers {
		if strings.HasSuffix(s.URL, "/") {
			t.Errorf("no-server-trailing-slash: %q", s.URL)
		}
		for _, m := range serverVar.FindAllStringSubmatch(s.URL, -1) {
			v, ok := s.Variables[m[1]]
			if !ok {
				t.Errorf("no-undefined-server-variable: %q in %q", m[1], s.URL)
				continue
			}
			if v.Enum != nil && len(v.Enum) == 0 {
				t.Errorf("no-server-variables-empty-enum: %q of %q", m[1], s.URL)
			}
		}
		if u, err := url.Parse(s.URL); err == nil && u.Host != "" {
			if h := u.Hostname(); h == "localhost" || h == "example.com" || strings.HasSuffix(h, ".example.com") {
				t.Errorf("no-server-example.com: %q", s.URL)
			}
		}
	}
}

// urlSafe is RFC 3986's unreserved characters.
var urlSafe = regexp.MustCompile(`^[A-Za-z0-9._~-]+$`)

func lintPaths(t *testing.T, doc *openapi3.T) {
	t.Helper()
	tags := map[string]bool{}
	for _, tag := range doc.Tags {
		tags[tag.Name] = true
	}
	ids := map[string]string{}
	paths := doc.Paths.Map()
	templates := make([]string, 0, len(paths))
	for p, item := range paths {
		templates = append(templates, p)
		if strings.Contains(p, "?") {
			t.Errorf("path-not-include-query: %s", p)
		}
		if p != "/" && strings.HasSuffix(p, "/") {
			t.Errorf("no-path-trailing-slash: %s", p)
		}
		for method, op := range item.Operations() {
			name := method + " " + p
			switch {
			case op.OperationID == "":
				t.Errorf("operation-operationId: %s has none", name)
			case ids[op.OperationID] != "":
				t.Errorf("operation-operationId-unique: %s and %s are both %q", ids[op.OperationID], name, op.OperationID)
			case !urlSafe.MatchString(op.OperationID):
				t.Errorf("operation-operationId-url-safe: %s: %q", name, op.OperationID)
			}
			ids[op.OperationID] = name
			if op.Summary == "" {
				t.Errorf("operation-summary: %s has none", name)
			}
			for _, tag := range op.Tags {
				if !tags[tag] {
					t.Errorf("operation-tag-defined: %s: tag %q is not declared", name, tag)
				}
			}
			var has2xx, has4xx bool
			for code := range op.Responses.Map() {
				has2xx = has2xx || strings.HasPrefix(code, "2")
				has4xx = has4xx || strings.HasPrefix(code, "4")
			}
			if !has2xx {
				t.Errorf("operation-2xx-response: %s has none", name)
			}
			if !has4xx {
				t.Errorf("operation-4xx-response: %s has none", name)
			}
			lintParams(t, name, p, item, op)
			lintSecurity(t, doc, name, op)
		}
	}
	slices.Sort(templates)
	for i, a := range templates {
		for _, b := range templates[i+1:] {
			identical, ambiguous := comparePaths(a, b)
			if identical {
				t.Errorf("no-identical-paths: %s and %s", a, b)
			} else if ambiguous {
				t.Errorf("no-ambiguous-paths: %s and %s", a, b)
			}
		}
	}
}

func lintParams(t *testing.T, name, path string, item *openapi3.PathItem, op *openapi3.Operation) {
	t.Helper()
	inPath := map[string]bool{}
	for _, m := range serverVar.FindAllStringSubmatch(path, -1) {
		inPath[m[1]] = true
	}
	declared := map[string]bool{}
	for _, params := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		seen := map[string]bool{} // an operation's parameter may override its path's
		for _, ref := range params {
			p := ref.Value
			if key := p.In + " " + p.Name; seen[key] {
				t.Errorf("operation-parameters-unique: %s: %s twice", name, key)
			} else {
				seen[key] = true
			}
			if p.In == "path" {
				declared[p.Name] = true
				if !inPath[p.Name] {
					t.Errorf("path-parameters-defined: %s declares path parameter %q, which the path lacks", name, p.Name)
				}
			}
		}
	}
	for p := range inPath {
		if !declared[p] {
			t.Errorf("path-parameters-defined: %s: {%s} is not declared", name, p)
		}
	}
}

func lintSecurity(t *testing.T, doc *openapi3.T, name string, op *openapi3.Operation) {
	t.Helper()
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	} else if len(reqs) == 0 {
		t.Errorf("security-defined: %s says nothing of its security (security: [] for none)", name)
	}
	for _, req := range reqs {
		for scheme := range req {
			if doc.Components == nil || doc.Components.SecuritySchemes[scheme] == nil {
				t.Errorf("security-defined: %s: scheme %q is not in components.securitySchemes", name, scheme)
			}
		}
	}
}

// comparePaths says whether two path templates are alike but for their
// parameters' names, and whether one request could match both: segment by
// segment equal, or a parameter on either side.
func comparePaths(a, b string) (identical, ambiguous bool) {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	if len(as) != len(bs) {
		return false, false
	}
	identical, ambiguous = true, true
	for i := range as {
		ap, bp := strings.HasPrefix(as[i], "{"), strings.HasPrefix(bs[i], "{")
		switch {
		case ap && bp:
		case ap || bp:
			identical = false
		case as[i] != bs[i]:
			return false, false
		}
	}
	return identical, ambiguous
}

// lintEnums walks a schema tree and checks no-enum-type-mismatch.
func lintEnums(t *testing.T, at string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		if enum, ok := v["enum"].([]any); ok {
			typ, _ := v["type"].(string)
			for _, e := range enum {
				if typ != "" && jsonType(e) != typ && !(typ == "number" && jsonType(e) == "integer") {
					t.Errorf("no-enum-type-mismatch: %s: %v is %s, the schema's type %s", at, e, jsonType(e), typ)
				}
			}
		}
		for k, e := range v {
			lintEnums(t, at+"/"+k, e)
		}
	case []any:
		for i, e := range v {
			lintEnums(t, fmt.Sprintf("%s/%d", at, i), e)
		}
	}
}

// jsonType is the JSON Schema type of a value as the YAML decoder gives it.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int64, uint64:
		return "integer"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// lintUnusedComponents checks no-unused-components: every schema, response,
// parameter, header, request body and example in components is the target
// of some $ref.
func lintUnusedComponents(t *testing.T, doc map[string]any) {
	t.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	components, _ := doc["components"].(map[string]any)
	for _, kind := range []string{"schemas", "responses", "parameters", "headers", "requestBodies", "examples"} {
		m, _ := components[kind].(map[string]any)
		for name := range m {
			ref := "#/components/" + kind + "/" + name
			if !strings.Contains(text, "'"+ref+"'") && !strings.Contains(text, `"`+ref+`"`) && !strings.Contains(text, "$ref: "+ref+"\n") {
				t.Errorf("no-unused-components: %s", ref)
			}
		}
	}
}
