package token_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	. "github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// The audiences of the tests: the service's default, and a client's own.
const (
	testDefaultAud = "https://api.test"
	ordersAud      = "orders-api"
	billingAud     = "https://billing.test/api"
	reportsAud     = "urn:example:reports"
)

// newAudClients returns the clients "svc" (no audiences of its own) and
// "multi" (audiences given, or orders, billing and reports), authenticated,
// and their set.
func newAudClients(tb testing.TB, audiences ...string) (*clients.Registry, map[string]*clients.Client) {
	tb.Helper()
	if audiences == nil {
		audiences = []string{ordersAud, billingAud, reportsAud}
	}
	cs, err := clients.New([]clients.Client{
		{ID: "svc", SecretSHA256: SHA256Hex("svc"), Scopes: []string{"read"}},
		{ID: "multi", SecretSHA256: SHA256Hex("multi"), Scopes: []string{"read"}, Audiences: audiences},
	})
	if err != nil {
		tb.Fatal(err)
	}
	byID := map[string]*clients.Client{}
	for _, id := range []string{"svc", "multi"} {
		if byID[id], err = cs.Authenticate(id, id, time.Now()); err != nil {
			tb.Fatal(err)
		}
	}
	return cs, byID
}

func TestIssueAudiences(t *testing.T) {
	e := newEnv(t, Options{Audience: testDefaultAud})
	noDefault := e.newService(t, e.keys, e.ids, Options{})
	_, byName := newAudClients(t)
	for _, tc := range []struct {
		name     string
		svc      *Service
		client   string
		resource []string
		audience []string
		want     []string // the token's aud
		wantErr  string   // in the ErrInvalidTarget error, instead
	}{
		{name: "no list: the service's default", client: "svc", want: []string{testDefaultAud}},
		{name: "no list: default as resource", client: "svc", resource: []string{testDefaultAud}, want: []string{testDefaultAud}},
		{name: "no list: default as audience", client: "svc", audience: []string{testDefaultAud}, want: []string{testDefaultAud}},
		{name: "no list: another one", client: "svc", audience: []string{ordersAud}, wantErr: `may not ask for audience "orders-api"`},
		{name: "no list, no default: no aud", svc: noDefault, client: "svc"},
		{name: "no list, no default: any one", svc: noDefault, client: "svc", audience: []string{testDefaultAud}, wantErr: `may not ask for audience "https://api.test"`},
		{name: "list: the first is the default", client: "multi", want: []string{ordersAud}},
		{name: "list: resource", client: "multi", resource: []string{billingAud}, want: []string{billingAud}},
		{name: "list: audience alias", client: "multi", audience: []string{ordersAud}, want: []string{ordersAud}},
		{name: "list: URN as resource", client: "multi", resource: []string{reportsAud}, want: []string{reportsAud}},
		{name: "list: the service's default is not on it", client: "multi", resource: []string{testDefaultAud}, wantErr: `may not ask for audience "https://api.test"`},
		{name: "list: both agreeing", client: "multi", resource: []string{billingAud}, audience: []string{billingAud}, want: []string{billingAud}},
		{name: "list: both disagreeing", client: "multi", resource: []string{billingAud}, audience: []string{ordersAud}, wantErr: "resource and audience name different audiences"},
		{name: "list: several, in order", client: "multi", audience: []string{reportsAud, ordersAud}, want: []string{reportsAud, ordersAud}},
		{name: "list: several resources", client: "multi", resource: []string{billingAud, reportsAud}, want: []string{billingAud, reportsAud}},
		{name: "list: several, one not allowed", client: "multi", audience: []string{ordersAud, "payroll"}, wantErr: `may not ask for audience "payroll"`},
		{name: "list: repeats dropped", client: "multi", audience: []string{ordersAud, ordersAud, billingAud, ordersAud}, want: []string{ordersAud, billingAud}},
		{name: "too many", client: "multi", audience: []string{"a", "b", "c", "d", "e"}, wantErr: "more than 4 audiences"},
		{name: "resource not absolute", client: "multi", resource: []string{ordersAud}, wantErr: "not an absolute URI"},
		{name: "resource relative path", client: "multi", resource: []string{"/api"}, wantErr: "not an absolute URI"},
		{name: "resource with a fragment", client: "multi", resource: []string{billingAud + "#x"}, wantErr: "fragment"},
		{name: "resource not a URI", client: "multi", resource: []string{"https://[::1/"}, wantErr: "not a URI"},
		{name: "audience with a space", client: "multi", audience: []string{"orders api"}, wantErr: "not allowed in an audience"},
		{name: "audience space-separated list", client: "multi", audience: []string{ordersAud + " " + billingAud}, wantErr: "not allowed in an audience"},
		{name: "audience with a quote", client: "multi", audience: []string{`orders"`}, wantErr: "not allowed in an audience"},
		{name: "audience not ASCII", client: "multi", audience: []string{"ordérs"}, wantErr: "not allowed in an audience"},
		{name: "empty audience", client: "multi", audience: []string{""}, wantErr: "must be 1 to 256"},
		{name: "audience too long", client: "multi", audience: []string{strings.Repeat("a", MaxAudienceLen+1)}, wantErr: "must be 1 to 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := tc.svc
			if svc == nil {
				svc = e.svc
			}
			iss, err := svc.Issue(t.Context(), byName[tc.client], IssueRequest{Resource: tc.resource, Audience: tc.audience})
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidTarget) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Issue: %+v, %v; want ErrInvalidTarget saying %q", iss, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Issue: %v", err)
			}
			v := mustValidate(t, svc, iss.AccessToken)
			if got := []string(v.Claims().Audience); !slices.Equal(got, tc.want) {
				t.Errorf("aud = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestIssueNeverTooLong: a request whose token would exceed MaxTokenLen
// (every scope of a client with long ones, four long audiences) is refused
// at issue, never issued for Validate to refuse.
func TestIssueNeverTooLong(t *testing.T) {
	e := newEnv(t, Options{})
	var scopes, auds []string
	for i := range MaxScopeLen / (MaxNameLen + 1) {
		scopes = append(scopes, strings.Repeat(string(rune('a'+i)), MaxNameLen))
	}
	for i := range MaxAudiences {
		auds = append(auds, strings.Repeat(string(rune('a'+i)), MaxAudienceLen))
	}
	cs, err := clients.New([]clients.Client{{ID: "big", SecretSHA256: SHA256Hex("big"), Scopes: scopes, Audiences: auds}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cs.Authenticate("big", "big", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Issue(t.Context(), c, IssueRequest{Audience: auds}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("Issue: err = %v, want ErrInvalidRequest", err)
	}
	iss, err := e.svc.Issue(t.Context(), c, IssueRequest{Audience: auds[:1]})
	if err != nil {
		t.Fatalf("one audience: %v", err)
	}
	mustValidate(t, e.svc, iss.AccessToken)
}

// TestCheckClientAudiences: a token stays good only while its aud is one its
// client could get today.
func TestCheckClientAudiences(t *testing.T) {
	e := newEnv(t, Options{Audience: testDefaultAud})
	cs, byName := newAudClients(t)
	issue := func(t *testing.T, client string, aud ...string) *Verified {
		t.Helper()
		iss, err := e.svc.Issue(t.Context(), byName[client], IssueRequest{Audience: aud})
		if err != nil {
			t.Fatal(err)
		}
		v := mustValidate(t, e.svc, iss.AccessToken)
		if err := e.svc.CheckClient(cs, v); err != nil {
			t.Fatalf("CheckClient with the set it was issued under: %v", err)
		}
		return v
	}
	orders, billing, both := issue(t, "multi", ordersAud), issue(t, "multi", billingAud), issue(t, "multi", ordersAud, billingAud)
	def := issue(t, "svc")

	// The operator takes billing off "multi".
	shrunk, _ := newAudClients(t, ordersAud, reportsAud)
	if err := e.svc.CheckClient(shrunk, orders); err != nil {
		t.Errorf("orders token after billing was taken off: %v", err)
	}
	for name, v := range map[string]*Verified{"billing": billing, "orders and billing": both} {
		if err := e.svc.CheckClient(shrunk, v); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s token after billing was taken off: err = %v, want ErrInvalidToken", name, err)
		}
	}

	// A service whose default audience changed no longer takes the old one.
	moved := e.newService(t, e.keys, e.ids, Options{Audience: "https://api2.test"})
	if err := moved.CheckClient(cs, def); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("default audience changed: err = %v, want ErrInvalidToken", err)
	}
	if err := moved.CheckClient(cs, orders); err != nil {
		t.Errorf("a client's own list does not depend on the default: %v", err)
	}
	// Without a default, a client that lists none has tokens without aud.
	none := e.newService(t, e.keys, e.ids, Options{})
	if err := none.CheckClient(cs, def); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("default audience removed: err = %v, want ErrInvalidToken", err)
	}

	// Tokens signed by our key whose aud the client could never get.
	signer := e.keys.Signer()
	hdr := map[string]any{"kid": signer.ID, "typ": "at+jwt"}
	for name, aud := range map[string]jwt.ClaimStrings{
		"no aud":       nil,
		"empty aud":    {},
		"unknown aud":  {"https://other.test"},
		"one unknown":  {ordersAud, "https://other.test"},
		"default aud":  {testDefaultAud}, // not on multi's list
		"aud of 'svc'": {testDefaultAud, ordersAud},
	} {
		claims := orders.Claims()
		claims.Audience = aud
		v := mustValidate(t, e.svc, signed(t, signer, hdr, claims))
		if err := e.svc.CheckClient(cs, v); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: err = %v, want ErrInvalidToken", name, err)
		}
	}

	// Removed and disabled clients.
	gone, err := clients.New([]clients.Client{{ID: "svc", SecretSHA256: SHA256Hex("svc")}})
	if err != nil {
		t.Fatal(err)
	}
	disabled, err := clients.New([]clients.Client{{ID: "multi", SecretSHA256: SHA256Hex("multi"), Audiences: []string{ordersAud}, Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]*clients.Registry{"removed": gone, "disabled": disabled} {
		if err := e.svc.CheckClient(set, orders); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s client: err = %v, want ErrInvalidToken", name, err)
		}
	}
}

// TestAudienceAcrossAPIs: a token for one API is not accepted by another,
// whether the API asks the issuer (ForAudience, behind ?audience=) or
// verifies locally with the shared policy (package client's local mode).
func TestAudienceAcrossAPIs(t *testing.T) {
	e := newEnv(t, Options{})
	_, byName := newAudClients(t)
	iss, err := e.svc.Issue(t.Context(), byName["multi"], IssueRequest{Resource: []string{billingAud}})
	if err != nil {
		t.Fatal(err)
	}
	v := mustValidate(t, e.svc, iss.AccessToken)
	if !v.ForAudience(billingAud) || v.ForAudience(ordersAud) || v.ForAudience("") {
		t.Errorf("ForAudience: aud %q", v.Claims().Audience)
	}
	local := func(api string) error {
		p := jwt.NewParser(jwtpolicy.ParserOptions(testIssuer, api, DefaultLeeway, e.clock.Now)...)
		_, err := p.ParseWithClaims(iss.AccessToken, &Claims{}, e.svc.KeyFor)
		return err
	}
	if err := local(billingAud); err != nil {
		t.Errorf("billing API verifying locally: %v", err)
	}
	if err := local(ordersAud); !errors.Is(err, jwt.ErrTokenInvalidAudience) {
		t.Errorf("orders API verifying locally: err = %v, want jwt.ErrTokenInvalidAudience", err)
	}
}

func TestNewServiceAudience(t *testing.T) {
	e := newEnv(t, Options{})
	for _, aud := range []string{"orders api", `a"b`, strings.Repeat("a", MaxAudienceLen+1), "ünï"} {
		if _, err := NewService(e.keys, e.store, e.ids, Options{Issuer: testIssuer, Audience: aud}); !errors.Is(err, ErrOptions) {
			t.Errorf("Audience %.20q: err = %v, want ErrOptions", aud, err)
		}
	}
}

// TestNarrowed: the clients whose tokens CheckClient would start to refuse
// some of, after a reload from one clients file to the next, are those whose
// allowed audiences lose one (or gain some where they had none, as the
// service's default audience makes tokens without aud refused), and no
// others: a client that only gains an audience, or is unchanged, is not.
func TestNarrowed(t *testing.T) {
	e := newEnv(t, Options{Audience: testDefaultAud})
	noDefault := e.newService(t, e.keys, e.ids, Options{})
	before, _ := newAudClients(t, ordersAud, billingAud)
	for _, tc := range []struct {
		name  string
		svc   *Service
		after []string // multi's audiences after
		want  []string
	}{
		{"unchanged", e.svc, []string{ordersAud, billingAud}, nil},
		{"one taken off", e.svc, []string{ordersAud}, []string{"multi"}},
		{"one added", e.svc, []string{ordersAud, billingAud, reportsAud}, nil},
		{"one swapped", e.svc, []string{ordersAud, reportsAud}, []string{"multi"}},
		{"all taken off: the default audience instead", e.svc, []string{}, []string{"multi"}},
		{"all taken off, no default: tokens without aud", noDefault, []string{}, []string{"multi"}},
	} {
		after, _ := newAudClients(t, tc.after...)
		if got := tc.svc.Narrowed(before, after); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Narrowed = %v, want %v", tc.name, got, tc.want)
		}
	}
	// "svc" lists none: the service's default, or no aud at all.
	none, _ := newAudClients(t, ordersAud)
	if got := noDefault.Narrowed(none, none); len(got) != 0 {
		t.Errorf("the same set: Narrowed = %v, want none", got)
	}
	withDefault := e.newService(t, e.keys, e.ids, Options{Audience: testDefaultAud})
	if got := withDefault.Narrowed(none, none); len(got) != 0 {
		t.Errorf("the same set, a default audience: Narrowed = %v, want none", got)
	}
}
