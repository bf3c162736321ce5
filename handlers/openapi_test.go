package handlers_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/goccy/go-yaml"

	"github.com/snowtoken/snowtoken/handlers"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
	"github.com/snowtoken/snowtoken/token/redisstore"
	"github.com/snowtoken/snowtoken/token/txn"
)

// openAPIPath is docs/openapi.yaml, relative to this package's directory.
const openAPIPath = "../docs/openapi.yaml"

// openAPIMethods are the keys of a path item that are operations.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// loadOpenAPI parses the OpenAPI description into plain maps and slices.
func loadOpenAPI(tb testing.TB) map[string]any {
	tb.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		tb.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		tb.Fatalf("%s: %v", openAPIPath, err)
	}
	if got, want := doc["openapi"], "3.0.3"; got != want {
		tb.Fatalf("%s: openapi %v, want %s", openAPIPath, got, want)
	}
	return doc
}

// openAPIPaths returns the description's path items by path template.
func openAPIPaths(tb testing.TB, doc map[string]any) map[string]map[string]any {
	tb.Helper()
	raw, ok := doc["paths"].(map[string]any)
	if !ok || len(raw) == 0 {
		tb.Fatalf("%s: no paths", openAPIPath)
	}
	paths := make(map[string]map[string]any, len(raw))
	for p, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			tb.Fatalf("%s: path %s is %T, want a mapping", openAPIPath, p, item)
		}
		paths[p] = m
	}
	return paths
}

// openAPITemplate turns a gin route (/ids/:id, /files/*rest) into an OpenAPI
// path template (/ids/{id}, /files/{rest}).
func openAPITemplate(ginPath string) string {
	segs := strings.Split(ginPath, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			segs[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segs, "/")
}

// routesEngine is the real engine, built by handlers.New, for its route table.
func routesEngine(tb testing.TB) *gin.Engine {
	tb.Helper()
	key := keysettest.MustKey(tb)
	keys, err := keyset.New(key)
	if err != nil {
		tb.Fatal(err)
	}
	_, sum, err := clients.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	clients, err := clients.New([]clients.Client{{ID: "docs", SecretSHA256: sum, Scopes: []string{"docs:read"}}})
	if err != nil {
		tb.Fatal(err)
	}
	ids, err := snowflakealg.New(snowflakealg.Settings{WorkerID: 1})
	if err != nil {
		tb.Fatal(err)
	}
	r := redistest.New(tb)
	store, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(store.Close)
	svc, err := token.NewService(keys, store, ids, token.Options{Issuer: "https://issuer.test"})
	if err != nil {
		tb.Fatal(err)
	}
	engine, err := handlers.New(handlers.Options{
		Service: svc, Clients: clients, IDs: ids, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return engine
}

// TestOpenAPIRoutes checks that docs/openapi.yaml documents every route the
// engine serves and nothing it does not.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	paths := openAPIPaths(t, loadOpenAPI(t))
	documented := map[string]bool{}
	for p, item := range paths {
		for _, m := range openAPIMethods {
			if _, ok := item[m]; ok {
				documented[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	served := map[string]bool{}
	for _, r := range routesEngine(t).Routes() {
		served[r.Method+" "+openAPITemplate(r.Path)] = true
	}

	var undocumented, unserved []string
	for op := range served {
		if !documented[op] {
			undocumented = append(undocumented, op)
		}
	}
	for op := range documented {
		if !served[op] {
			unserved = append(unserved, op)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unserved)
	if len(undocumented) > 0 {
		t.Errorf("served but not in %s:\n\t%s", openAPIPath, strings.Join(undocumented, "\n\t"))
	}
	if len(unserved) > 0 {
		t.Errorf("in %s but not served:\n\t%s", openAPIPath, strings.Join(unserved, "\n\t"))
	}
}

// TestOpenAPIOperations checks that every operation has a response and
// declares each parameter of its path template.
func TestOpenAPIOperations(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for p, item := range openAPIPaths(t, doc) {
		for _, m := range openAPIMethods {
			raw, ok := item[m]
			if !ok {
				continue
			}
			name := strings.ToUpper(m) + " " + p
			op, ok := raw.(map[string]any)
			if !ok {
				t.Errorf("%s: operation is %T, want a mapping", name, raw)
				continue
			}
			if responses, _ := op["responses"].(map[string]any); len(responses) == 0 {
				t.Errorf("%s: no responses", name)
			}
			declared := map[string]bool{}
			for _, params := range []any{item["parameters"], op["parameters"]} {
				list, _ := params.([]any)
				for _, param := range list {
					pm, _ := param.(map[string]any)
					if ref, ok := pm["$ref"].(string); ok {
						pm, _ = resolveRef(doc, ref).(map[string]any)
					}
					if pm["in"] == "path" {
						declared[fmt.Sprint(pm["name"])] = true
					}
				}
			}
			for _, want := range pathParams(p) {
				if !declared[want] {
					t.Errorf("%s: path parameter %q not declared", name, want)
				}
			}
		}
	}
}

// pathParams returns the names in a path template's braces.
func pathParams(template string) []string {
	var names []string
	for _, seg := range strings.Split(template, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			names = append(names, seg[1:len(seg)-1])
		}
	}
	return names
}

// TestOpenAPIRefs checks that every $ref is local and resolves.
func TestOpenAPIRefs(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	var refs int
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"]; ok {
				refs++
				s, _ := ref.(string)
				if resolveRef(doc, s) == nil {
					t.Errorf("%s: $ref %v does not resolve", at, ref)
				}
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", at, i), e)
			}
		}
	}
	walk("#", doc)
	if refs == 0 {
		t.Errorf("%s: no $ref found; is the walk broken?", openAPIPath)
	}
}

// resolveRef follows a local JSON pointer ("#/components/schemas/X") in doc,
// or returns nil.
func resolveRef(doc map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[tok]; !ok {
			return nil
		}
	}
	return cur
}

// TestOpenAPIResponseNames pins the names of every JSON answer to the
// description: each member a handler writes is a property of its schema, and
// each required property is written. A member renamed in one place and not
// the other fails here.
func TestOpenAPIResponseNames(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	e := newEnv(t, withTxn(txn.Options{TrustDomain: trustDomain}))
	tok := e.issue(t, e.Normal, nil)
	var jti string
	if err := json.Unmarshal(tok.JTI, &jti); err != nil {
		t.Fatal(err)
	}
	form := func(c *client, v url.Values) func() *response {
		return func() *response { return e.post(t, "/token/introspect", c, v) }
	}
	// An exchanged token (opaque: its act is in its record), whose answers
	// have the members and headers only exchange writes.
	x := exchangeEnv(t, nil)
	user := x.issue(t, x.Gateway, url.Values{"subject": {"alice"}}).AccessToken
	actor := url.Values{"actor_token": {x.issue(t, x.client(ordersX), nil).AccessToken}, "actor_token_type": {typeAccess}}
	ex := exchanged(t, x.exchange(t, x.client(ordersX), user, actor, ""))["access_token"].(string)
	get := func(path string) func() *response {
		return func() *response { return e.do(t, http.MethodGet, path, nil, nil) }
	}
	tests := []struct {
		name, schema string
		do           func() *response
	}{
		{"issue", "TokenResponse", func() *response {
			return e.post(t, "/token", &e.Normal, url.Values{"grant_type": {"client_credentials"}})
		}},
		{"exchange", "TokenResponse", func() *response {
			actor := url.Values{"actor_token": {x.issue(t, x.client(ordersX), nil).AccessToken}, "actor_token_type": {typeAccess}}
			return x.exchange(t, x.client(ordersX), user, actor, "")
		}},
		{"validate", "TokenClaims", func() *response { return e.validate(t, tok.AccessToken) }},
		{"validate exchanged", "TokenClaims", func() *response { return x.validate(t, ex) }},
		{"introspect exchanged", "TokenClaims", func() *response { return x.post(t, "/token/introspect", &x.Auditor, url.Values{"token": {ex}}) }},
		{"introspect active", "TokenClaims", form(&e.Normal, url.Values{"token": {tok.AccessToken}})},
		{"introspect inactive", "InactiveToken", form(&e.Normal, url.Values{"token": {"nope"}})},
		{"error", "OAuthError", form(nil, url.Values{"token": {"nope"}})},
		{"ids", "IDParts", get("/ids/" + jti)},
		{"jwks", "JWKS", get("/.well-known/jwks.json")},
		{"jwk", "JWK", nil}, // checked with jwks, below
		{"metadata", "AuthorizationServerMetadata", get("/.well-known/oauth-authorization-server")},
		{"healthz", "Health", get("/healthz")},
		{"readyz", "Ready", get("/readyz")},
	}
	t.Run("validate headers", func(t *testing.T) {
		ok, _ := resolveRef(doc, "#/paths/~1token~1validate/get/responses/200/headers").(map[string]any)
		minted := e.do(t, http.MethodGet, "/token/validate?txn_token=1", nil, http.Header{"Authorization": {"Bearer " + tok.AccessToken}})
		exchanged := x.validate(t, ex) // an exchanged token's answer has every X-Auth- header
		for _, r := range []*response{e.validate(t, tok.AccessToken), minted, exchanged} {
			for name := range r.Header {
				if _, documented := ok[name]; (strings.HasPrefix(name, "X-Auth-") || strings.HasPrefix(name, "Txn-")) && !documented {
					t.Errorf("validate sets %s, which the description does not name", name)
				}
			}
		}
		for name := range ok {
			if exchanged.Header.Get(name) == "" && minted.Header.Get(name) == "" {
				t.Errorf("the description names %s, which validate does not set", name)
			}
		}
	})
	var jwks map[string]any
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body map[string]any
			if tt.do == nil {
				keys, _ := jwks["keys"].([]any)
				if len(keys) == 0 {
					t.Fatalf("no keys in the JWKS %v", jwks)
				}
				body, _ = keys[0].(map[string]any)
			} else {
				body = tt.do().object(t)
			}
			if tt.schema == "JWKS" {
				jwks = body
			}
			schema, _ := resolveRef(doc, "#/components/schemas/"+tt.schema).(map[string]any)
			props, _ := schema["properties"].(map[string]any)
			if len(props) == 0 {
				t.Fatalf("schema %s has no properties", tt.schema)
			}
			for k := range body {
				if _, ok := props[k]; !ok {
					t.Errorf("%s writes %q, which schema %s does not name", tt.name, k, tt.schema)
				}
			}
			required, _ := schema["required"].([]any)
			for _, k := range required {
				if _, ok := body[fmt.Sprint(k)]; !ok {
					t.Errorf("%s does not write %v, which schema %s requires", tt.name, k, tt.schema)
				}
			}
		})
	}
}
