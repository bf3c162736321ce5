package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/clientauth"
	"github.com/snowtoken/snowtoken/token/clients"
)

// testJWKS is a public Ed25519 key set.
const testJWKS = `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`

// run runs the CLI with args and returns what it printed.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Run(t.Context(), args, nil, &out)
	return out.String(), err
}

// jwksAndClients writes testJWKS to a file in a new directory, and names a
// clients file beside it.
func jwksAndClients(t *testing.T) (keys, file string) {
	t.Helper()
	dir := t.TempDir()
	keys = filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(keys, []byte(testJWKS), 0o600); err != nil {
		t.Fatal(err)
	}
	return keys, filepath.Join(dir, "clients.json")
}

// TestClientNewAuth: `client new` makes a private_key_jwt client (keys
// inline or at a URL) or a workload identity client, with no secret, and
// refuses flags that do not go together.
func TestClientNewAuth(t *testing.T) {
	keys, file := jwksAndClients(t)
	for _, args := range [][]string{
		{"-id", "pk", "-jwks-file", keys},
		{"-id", "pk-uri", "-auth-method", "private_key_jwt", "-jwks-uri", "https://keys.example/jwks"},
		{"-id", "orders", "-workload-issuer", "https://kubernetes.default.svc.cluster.local", "-workload-subject", "system:serviceaccount:shop:orders",
			"-workload-jwks-uri", "https://kubernetes.default.svc/openid/v1/jwks"},
		{"-id", "post", "-auth-method", "client_secret_post"},
	} {
		out, err := run(t, append([]string{"client", "new", "-file", file, "-scopes", "a"}, args...)...)
		if err != nil {
			t.Fatalf("client new %v: %v", args, err)
		}
		if hasSecret := strings.Contains(out, "client_secret:"); hasSecret != (args[1] == "post") {
			t.Errorf("client new %v printed:\n%s", args, out)
		}
	}
	cs, err := clients.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"pk": clients.AuthPrivateKeyJWT, "pk-uri": clients.AuthPrivateKeyJWT, "orders": clients.AuthWorkloadIdentity, "post": clients.AuthSecretPost} {
		if got := byID(t, cs, id).Method(); got != want {
			t.Errorf("%s: method %s, want %s", id, got, want)
		}
	}
	data, _ := os.ReadFile(file)
	var f struct{ Clients []map[string]any }
	json.Unmarshal(data, &f)
	for _, c := range f.Clients {
		if _, ok := c["secret_sha256"]; ok != (c["id"] == "post") {
			t.Errorf("client %v: secret_sha256 written: %v", c["id"], ok)
		}
	}
	list, err := run(t, "client", "list", "-file", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"AUTH METHOD", "private_key_jwt", "workload_identity", "client_secret_post"} {
		if !strings.Contains(list, want) {
			t.Errorf("client list shows no %q:\n%s", want, list)
		}
	}

	for _, bad := range [][]string{
		{"-jwks-file", keys, "-jwks-uri", "https://keys.example/jwks"},
		{"-auth-method", "client_secret_basic", "-jwks-uri", "https://keys.example/jwks"},
		{"-workload-issuer", "https://k8s.example", "-workload-subject", "s", "-auth-method", "private_key_jwt"},
		{"-jwks-uri", "http://keys.example/jwks"},
		// The cloud metadata address, over https as over http (only
		// http was refused once).
		{"-jwks-uri", "http://169.254.169.254/latest/meta-data/"},
		{"-jwks-uri", "https://169.254.169.254/latest/meta-data/"},
		{"-workload-issuer", "https://169.254.169.254", "-workload-subject", "s"},
		{"-workload-issuer", "https://k8s.example", "-workload-subject", "s", "-workload-jwks-uri", "https://[fe80::1]/jwks"},
		{"-auth-method", "private_key_jwt"},
		{"-auth-method", "none"},
		{"-workload-issuer", "https://k8s.example"},
		{"-jwks-file", keys, "-secret-valid-for", "1h"},
		{"-jwks-file", filepath.Join(filepath.Dir(keys), "missing.json")},
	} {
		if out, err := run(t, append([]string{"client", "new", "-id", "bad", "-scopes", "a"}, bad...)...); err == nil {
			t.Errorf("client new %v: no error; printed:\n%s", bad, out)
		}
	}
}

// TestClientSetAuth: `client set-auth` moves a client from a secret to
// private_key_jwt (its secret dropped), to a workload identity, and back
// to a secret, made and printed once.
func TestClientSetAuth(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "clients.json")
	if _, err := run(t, "client", "new", "-file", file, "-id", "svc", "-scopes", "a", "-secret-valid-for", "24h"); err != nil {
		t.Fatal(err)
	}
	method := func() *clients.Client {
		t.Helper()
		cs, err := clients.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		return byID(t, cs, "svc")
	}
	if out, err := run(t, "client", "set-auth", "-file", file, "-id", "svc", "-jwks-uri", "https://keys.example/jwks"); err != nil || strings.Contains(out, "client_secret:") {
		t.Fatalf("set-auth -jwks-uri: %v\n%s", err, out)
	}
	if c := method(); c.Method() != clients.AuthPrivateKeyJWT || c.SecretSHA256 != "" || !c.SecretExpires.IsZero() {
		t.Errorf("after -jwks-uri: %+v", c)
	}
	if _, err := run(t, "client", "set-auth", "-file", file, "-id", "svc", "-workload-issuer", "https://k8s.example", "-workload-subject", "system:serviceaccount:a:b"); err != nil {
		t.Fatal(err)
	}
	if c := method(); c.Method() != clients.AuthWorkloadIdentity || c.JWKSURI != "" || c.TokenEndpointAuthMethod != "" {
		t.Errorf("after -workload-*: %+v", c)
	}
	out, err := run(t, "client", "set-auth", "-file", file, "-id", "svc", "-auth-method", "client_secret_basic")
	if err != nil || !strings.Contains(out, "client_secret:") {
		t.Fatalf("set-auth back to a secret: %v\n%s", err, out)
	}
	if c := method(); c.Method() != clients.AuthSecretBasic || c.SecretSHA256 == "" || c.WorkloadIdentity != nil {
		t.Errorf("after -auth-method client_secret_basic: %+v", c)
	}
	if _, err := run(t, "client", "set-auth", "-file", file, "-id", "svc"); err == nil {
		t.Error("set-auth with no flag: no error")
	}
}

// byID is the client id of cs.
func byID(t *testing.T, cs *clients.Registry, id string) *clients.Client {
	t.Helper()
	for _, c := range cs.All() {
		if c.ID == id {
			return &c
		}
	}
	t.Fatalf("no client %q", id)
	return nil
}

// TestClientDPoPBound: `client new -dpop-bound` and `client set-dpop`
// write dpop_bound_access_tokens, which the issuer then reads; set-dpop
// needs -bound said.
func TestClientDPoPBound(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clients.json")
	if _, err := run(t, "client", "new", "-file", file, "-id", "b", "-scopes", "a", "-dpop-bound"); err != nil {
		t.Fatal(err)
	}
	bound := func() bool {
		t.Helper()
		cs, err := clients.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		return byID(t, cs, "b").DPoPBoundAccessTokens
	}
	if !bound() {
		t.Error("client new -dpop-bound: not bound")
	}
	if _, err := run(t, "client", "set-dpop", "-file", file, "-id", "b", "-bound=false"); err != nil || bound() {
		t.Errorf("set-dpop -bound=false: %v, bound %v", err, bound())
	}
	if _, err := run(t, "client", "set-dpop", "-file", file, "-id", "b", "-bound"); err != nil || !bound() {
		t.Errorf("set-dpop -bound: %v, bound %v", err, bound())
	}
	if _, err := run(t, "client", "set-dpop", "-file", file, "-id", "b"); err == nil {
		t.Error("set-dpop without -bound: no error")
	}
}

// TestClientRefreshKeys: `client refresh-keys` changes a fetched-keys
// client's keys_refreshed at every run, even twice within a second, which
// the issuer reads; a client whose keys are in the file, or that has a
// secret, is refused and the file left as it was; set-auth clears it.
func TestClientRefreshKeys(t *testing.T) {
	keys, file := jwksAndClients(t)
	for _, args := range [][]string{
		{"-id", "uri", "-jwks-uri", "https://keys.example/jwks"},
		{"-id", "orders", "-workload-issuer", "https://k8s.example", "-workload-subject", "system:serviceaccount:a:b"},
		{"-id", "inline", "-jwks-file", keys},
		{"-id", "post", "-auth-method", "client_secret_post"},
	} {
		if _, err := run(t, append([]string{"client", "new", "-file", file, "-scopes", "a"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	refreshed := func(id string) time.Time {
		t.Helper()
		cs, err := clients.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		return byID(t, cs, id).KeysRefreshed
	}
	start := time.Now().UTC().Truncate(time.Second)
	var last time.Time
	for i := range 3 {
		out, err := run(t, "client", "refresh-keys", "-file", file, "-id", "uri")
		if err != nil || !strings.Contains(out, "keys_refreshed") {
			t.Fatalf("refresh-keys: %v\n%s", err, out)
		}
		got := refreshed("uri")
		if got.Before(start) || !got.After(last) {
			t.Errorf("run %d: keys_refreshed %v after %v: want a later one each time, from %v on", i+1, got, last, start)
		}
		last = got
	}
	if _, err := run(t, "client", "refresh-keys", "-file", file, "-id", "orders"); err != nil || refreshed("orders").IsZero() {
		t.Errorf("refresh-keys of a workload: %v, keys_refreshed %v", err, refreshed("orders"))
	}
	before, _ := os.ReadFile(file)
	for _, id := range []string{"inline", "post", "nobody"} {
		if out, err := run(t, "client", "refresh-keys", "-file", file, "-id", id); err == nil {
			t.Errorf("refresh-keys -id %s: no error\n%s", id, out)
		}
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Error("a refused refresh-keys changed the file")
	}
	if _, err := run(t, "client", "set-auth", "-file", file, "-id", "uri", "-auth-method", "client_secret_basic"); err != nil {
		t.Fatalf("set-auth to a secret after refresh-keys: %v", err)
	}
	if got := refreshed("uri"); !got.IsZero() {
		t.Errorf("set-auth kept keys_refreshed %v", got)
	}
}

// TestClientExchange: `client new -token-exchange -impersonation` and
// `client set-exchange` write token_exchange and impersonation, which the
// issuer then reads; impersonation alone is refused, by the command and
// by the file's check.
func TestClientExchange(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clients.json")
	if _, err := run(t, "client", "new", "-file", file, "-id", "x", "-scopes", "a", "-token-exchange", "-impersonation"); err != nil {
		t.Fatal(err)
	}
	state := func() (bool, bool) {
		t.Helper()
		cs, err := clients.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		c := byID(t, cs, "x")
		return c.TokenExchange, c.Impersonation
	}
	if ex, imp := state(); !ex || !imp {
		t.Errorf("client new -token-exchange -impersonation: %v %v", ex, imp)
	}
	if _, err := run(t, "client", "set-exchange", "-file", file, "-id", "x", "-token-exchange"); err != nil {
		t.Fatal(err)
	}
	if ex, imp := state(); !ex || imp {
		t.Errorf("set-exchange -token-exchange: %v %v, want true false", ex, imp)
	}
	if _, err := run(t, "client", "set-exchange", "-file", file, "-id", "x", "-token-exchange=false"); err != nil {
		t.Fatal(err)
	}
	if ex, imp := state(); ex || imp {
		t.Errorf("set-exchange -token-exchange=false: %v %v", ex, imp)
	}
	for _, args := range [][]string{
		{"client", "set-exchange", "-file", file, "-id", "x"},
		{"client", "set-exchange", "-file", file, "-id", "x", "-token-exchange=false", "-impersonation"},
		{"client", "new", "-file", file, "-id", "y", "-scopes", "a", "-impersonation"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestClientExchangeSubjectIssuers: `client new -subject-issuer` and
// `client set-exchange -subject-issuer` / `-remove-subject-issuer` write
// subject_token_issuers, an issuer once (a second -subject-issuer of it
// replaces its entry), which the issuer then reads; -token-exchange=false
// drops them; an issuer without token exchange, the -subject-issuer-*
// flags alone, and removing one the client does not list are refused.
func TestClientExchangeSubjectIssuers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clients.json")
	const k8s, ci = "https://kubernetes.default.svc.cluster.local", "https://token.actions.example"
	if _, err := run(t, "client", "new", "-file", file, "-id", "x", "-scopes", "a", "-token-exchange", "-subject-issuer", k8s); err != nil {
		t.Fatal(err)
	}
	issuers := func() []clientauth.TrustedIssuer {
		t.Helper()
		cs, err := clients.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		return byID(t, cs, "x").SubjectTokenIssuers
	}
	if got := issuers(); len(got) != 1 || got[0] != (clientauth.TrustedIssuer{Issuer: k8s}) {
		t.Errorf("client new -subject-issuer: %+v", got)
	}
	for _, args := range [][]string{
		{"-subject-issuer", ci},
		{"-subject-issuer", k8s, "-subject-issuer-jwks-uri", "https://kubernetes.default.svc/openid/v1/jwks"},
	} {
		if _, err := run(t, append([]string{"client", "set-exchange", "-file", file, "-id", "x"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	want := []clientauth.TrustedIssuer{{Issuer: k8s, JWKSURI: "https://kubernetes.default.svc/openid/v1/jwks"}, {Issuer: ci}}
	if got := issuers(); !slices.Equal(got, want) {
		t.Errorf("after set-exchange -subject-issuer twice: %+v, want %+v", got, want)
	}
	if _, err := run(t, "client", "set-exchange", "-file", file, "-id", "x", "-remove-subject-issuer", k8s); err != nil {
		t.Fatal(err)
	}
	if got := issuers(); !slices.Equal(got, want[1:]) {
		t.Errorf("after -remove-subject-issuer: %+v, want %+v", got, want[1:])
	}
	for _, args := range [][]string{
		{"client", "set-exchange", "-file", file, "-id", "x", "-remove-subject-issuer", k8s},
		{"client", "set-exchange", "-file", file, "-id", "x", "-subject-issuer-jwks-uri", "https://k.example/jwks"},
		{"client", "set-exchange", "-file", file, "-id", "x", "-subject-issuer", "http://plain.example"},
		{"client", "new", "-file", file, "-id", "y", "-scopes", "a", "-subject-issuer", k8s},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if _, err := run(t, "client", "set-exchange", "-file", file, "-id", "x", "-token-exchange=false"); err != nil {
		t.Fatal(err)
	}
	if got := issuers(); len(got) != 0 {
		t.Errorf("after -token-exchange=false: %+v, want none", got)
	}
}
