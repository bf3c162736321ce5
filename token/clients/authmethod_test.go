package clients

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// testJWKS is a public Ed25519 key set.
const testJWKS = `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`

const testWorkload = `{"issuer":"https://kubernetes.default.svc.cluster.local","subject":"system:serviceaccount:shop:orders","jwks_uri":"https://kubernetes.default.svc/openid/v1/jwks"}`

// TestAuthMethods: which combinations of method, secret and keys a clients
// file may hold, and the method each client then has.
func TestAuthMethods(t *testing.T) {
	good := SHA256Hex("secret")
	for _, tc := range []struct {
		name, fields string
		want         string // the client's Method; empty: the file is refused
		wantErr      string // what the refusal names
	}{
		{"secret, no method", `"secret_sha256": "` + good + `"`, AuthSecretBasic, ""},
		{"secret, basic", `"secret_sha256": "` + good + `", "token_endpoint_auth_method": "client_secret_basic"`, AuthSecretBasic, ""},
		{"secret, post", `"secret_sha256": "` + good + `", "token_endpoint_auth_method": "client_secret_post"`, AuthSecretPost, ""},
		{"private_key_jwt, jwks", `"token_endpoint_auth_method": "private_key_jwt", "jwks": ` + testJWKS, AuthPrivateKeyJWT, ""},
		{"private_key_jwt, jwks_uri", `"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://keys.example/jwks"`, AuthPrivateKeyJWT, ""},
		{"private_key_jwt, jwks_uri on localhost", `"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "http://127.0.0.1:9/jwks"`, AuthPrivateKeyJWT, ""},
		{"workload identity", `"workload_identity": ` + testWorkload, AuthWorkloadIdentity, ""},
		{"keys_refreshed, jwks_uri", `"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://keys.example/jwks", "keys_refreshed": "2026-11-28T10:00:00Z"`, AuthPrivateKeyJWT, ""},
		{"keys_refreshed, workload identity", `"workload_identity": ` + testWorkload + `, "keys_refreshed": "2026-11-28T10:00:00Z"`, AuthWorkloadIdentity, ""},

		{"no secret, no method", ``, "", "secret_sha256 is required"},
		{"unknown method", `"secret_sha256": "` + good + `", "token_endpoint_auth_method": "tls_client_auth"`, "", "token_endpoint_auth_method"},
		{"method in another case", `"secret_sha256": "` + good + `", "token_endpoint_auth_method": "Client_Secret_Basic"`, "", "token_endpoint_auth_method"},
		{"private_key_jwt with a secret", `"secret_sha256": "` + good + `", "token_endpoint_auth_method": "private_key_jwt", "jwks": ` + testJWKS, "", "no secret"},
		{"private_key_jwt with a secret expiry", `"secret_expires": "2030-01-01T00:00:00Z", "token_endpoint_auth_method": "private_key_jwt", "jwks": ` + testJWKS, "", "no secret"},
		{"private_key_jwt without keys", `"token_endpoint_auth_method": "private_key_jwt"`, "", "jwks or jwks_uri"},
		{"private_key_jwt with both", `"token_endpoint_auth_method": "private_key_jwt", "jwks": ` + testJWKS + `, "jwks_uri": "https://keys.example/jwks"`, "", "give one"},
		{"jwks_uri over http", `"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "http://keys.example/jwks"`, "", "jwks_uri"},
		{"jwks with a private key", `"token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, "", "jwks"},
		{"jwks not a set", `"token_endpoint_auth_method": "private_key_jwt", "jwks": []`, "", "jwks"},
		{"jwks on a secret client", `"secret_sha256": "` + good + `", "jwks": ` + testJWKS, "", "jwks"},
		{"workload identity with a method", `"token_endpoint_auth_method": "private_key_jwt", "workload_identity": ` + testWorkload, "", "workload_identity"},
		{"workload identity with a secret", `"secret_sha256": "` + good + `", "workload_identity": ` + testWorkload, "", "no secret"},
		{"workload identity with jwks", `"jwks": ` + testJWKS + `, "workload_identity": ` + testWorkload, "", "workload_identity"},
		{"workload identity without a subject", `"workload_identity": {"issuer": "https://k8s.example"}`, "", "subject"},
		{"keys_refreshed, inline jwks", `"token_endpoint_auth_method": "private_key_jwt", "jwks": ` + testJWKS + `, "keys_refreshed": "2026-11-28T10:00:00Z"`, "", "keys_refreshed"},
		{"keys_refreshed, a secret", `"secret_sha256": "` + good + `", "keys_refreshed": "2026-11-28T10:00:00Z"`, "", "keys_refreshed"},
		{"jwks_uri on the metadata address", `"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://169.254.169.254/latest/meta-data/"`, "", "link-local"},
		{"workload identity, unknown field", `"workload_identity": {"issuer": "https://k8s.example", "subject": "s", "audience": "x"}`, "", "audience"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := `{"clients": [{"id": "ok", "secret_sha256": "` + good + `"}, {"id": "svc", "scopes": ["a"]` + strings.TrimSuffix(", "+tc.fields, ", ") + `}]}`
			cs, err := Load(WriteFile(t, "clients.json", []byte(file)))
			if tc.want == "" {
				if !errors.Is(err, ErrFile) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "svc") {
					t.Fatalf("Load: err = %v, want ErrFile naming svc and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cs.ByID("svc").Method(); got != tc.want {
				t.Errorf("Method = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAuthenticateAssertionClients: a client without a secret never
// authenticates with one, not even the empty secret; an assertion client is
// found by AssertionClient, a secret client is not.
func TestAuthenticateAssertionClients(t *testing.T) {
	cs, err := Load(WriteFile(t, "clients.json", []byte(`{"clients": [
		{"id": "pk", "token_endpoint_auth_method": "private_key_jwt", "jwks": `+testJWKS+`},
		{"id": "wl", "workload_identity": `+testWorkload+`},
		{"id": "off", "disabled": true, "workload_identity": `+testWorkload+`},
		{"id": "post", "secret_sha256": "`+SHA256Hex("s")+`", "token_endpoint_auth_method": "client_secret_post"},
		{"id": "any", "secret_sha256": "`+SHA256Hex("s")+`"}
	]}`)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"pk", "wl"} {
		for _, secret := range []string{"", "s", strings.Repeat("0", 64)} {
			if _, err := cs.Authenticate(id, secret, now); !errors.Is(err, ErrInvalidClient) {
				t.Errorf("Authenticate(%s, %q) = %v, want ErrInvalidClient", id, secret, err)
			}
		}
		c, reg, err := cs.AssertionClient(id)
		if err != nil || c.ID != id || reg.ClientID != id {
			t.Errorf("AssertionClient(%s) = %v, %+v, %v", id, c, reg, err)
		}
	}
	if _, reg, _ := cs.AssertionClient("pk"); reg.Keys == nil || reg.Keys.Len() != 1 || reg.Workload != nil {
		t.Errorf("pk's registration %+v: want its one inline key", reg)
	}
	if _, reg, _ := cs.AssertionClient("wl"); reg.Workload == nil || reg.Workload.Subject != "system:serviceaccount:shop:orders" {
		t.Errorf("wl's registration %+v: want its workload identity", reg)
	}
	for _, id := range []string{"post", "any", "off", "nobody"} {
		if _, _, err := cs.AssertionClient(id); !errors.Is(err, ErrInvalidClient) {
			t.Errorf("AssertionClient(%s) = %v, want ErrInvalidClient", id, err)
		}
	}
	post, anyMethod := cs.ByID("post"), cs.ByID("any")
	for _, tc := range []struct {
		c      *Client
		method string
		want   bool
	}{
		{post, AuthSecretPost, true}, {post, AuthSecretBasic, false},
		{anyMethod, AuthSecretPost, true}, {anyMethod, AuthSecretBasic, true},
		{cs.ByID("pk"), AuthSecretBasic, false}, {cs.ByID("pk"), AuthSecretPost, false},
	} {
		if got := tc.c.MaySendSecretBy(tc.method); got != tc.want {
			t.Errorf("%s.MaySendSecretBy(%s) = %v, want %v", tc.c.ID, tc.method, got, tc.want)
		}
	}
}

// TestAuthMethodRoundTrip: the CLI writes clients with encoding/json; what
// it writes of an assertion client loads back the same, with no
// secret_sha256 member.
func TestAuthMethodRoundTrip(t *testing.T) {
	f, err := ParseFile([]byte(`{"clients": [
		{"id": "pk", "scopes": [], "token_endpoint_auth_method": "private_key_jwt", "jwks": `+testJWKS+`},
		{"id": "wl", "scopes": [], "workload_identity": `+testWorkload+`}]}`), "clients.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret_sha256") {
		t.Errorf("written with a secret member:\n%s", out)
	}
	cs, err := Load(WriteFile(t, "clients.json", out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if cs.ByID("pk").Method() != AuthPrivateKeyJWT || cs.ByID("wl").Method() != AuthWorkloadIdentity {
		t.Errorf("methods %s, %s", cs.ByID("pk").Method(), cs.ByID("wl").Method())
	}
}
