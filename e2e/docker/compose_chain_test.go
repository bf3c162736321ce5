package docker

import (
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeCallChain: billing is the consumer's image, run as the
// consumer is (checkRunsAsConsumer), with no volume, serving
// /invoices to a caller with a token of invoices:read and a Txn-Token of
// the issuers' trust domain, which it verifies with their JWKS through the
// gateway. The consumer, behind nginx's /orders, verifies the Txn-Token of
// the same domain and calls billing at its address with it and a token of
// the service client init makes (CONSUMER_NEXT_CLIENT_ID is init's
// -service-client-id, its scopes billing's), whose secret it reads from
// the one volume that holds it alone, read-only: never the secrets volume.
// billing is on internal networks only, shared with the consumer and nginx
// alone, and nginx routes nothing to it.
func TestComposeCallChain(t *testing.T) {
	p := loadCompose(t, true)
	c, b, initSvc := service(t, p, "consumer"), service(t, p, "billing"), service(t, p, "init")
	checkRunsAsConsumer(t, p, "billing")
	if got := c.DependsOn["init"].Condition; got != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("consumer depends_on init %q, want %s: its secret file must exist", got, types.ServiceConditionCompletedSuccessfully)
	}
	if len(b.Volumes) != 0 {
		t.Errorf("billing mounts %v, want nothing", b.Volumes)
	}

	be, ce, args := env(t, b), env(t, c), initCommand(t, initSvc)
	domain := env(t, service(t, p, "issuer"))["SNOWTOKEN_TXN_TRUST_DOMAIN"]
	for k, want := range map[string]string{
		"SNOWTOKEN_ISSUER_URL":      ce["SNOWTOKEN_ISSUER_URL"], // the gateway
		"CONSUMER_ADDR":             ce["CONSUMER_ADDR"],
		"CONSUMER_RESOURCE":         "invoices",
		"CONSUMER_TXN_TRUST_DOMAIN": domain,
	} {
		if be[k] != want || want == "" {
			t.Errorf("billing %s=%q, want %q", k, be[k], want)
		}
	}
	for k, want := range map[string]string{
		"CONSUMER_TXN_TRUST_DOMAIN": domain,
		"CONSUMER_NEXT_CLIENT_ID":   args[initServiceID],
		"CONSUMER_NEXT_SECRET_FILE": args[initServiceSecretFile],
		"CONSUMER_NEXT_SCOPE":       be["CONSUMER_RESOURCE"] + ":read", // what billing requires
	} {
		if ce[k] != want || want == "" {
			t.Errorf("consumer %s=%q, want %q", k, ce[k], want)
		}
	}
	if !slices.Contains(strings.Split(args[initServiceScopes], ","), ce["CONSUMER_NEXT_SCOPE"]) {
		t.Errorf("init gives %s scopes %s, not the consumer's CONSUMER_NEXT_SCOPE %s", args[initServiceID], args[initServiceScopes], ce["CONSUMER_NEXT_SCOPE"])
	}
	_, port, _ := net.SplitHostPort(be["CONSUMER_ADDR"])
	if u, err := url.Parse(ce["CONSUMER_NEXT_URL"]); err != nil || u.Scheme != "http" || u.Hostname() != "billing" || u.Port() != port || u.Path != "/invoices" {
		t.Errorf("consumer CONSUMER_NEXT_URL=%q, want http://billing:%s/invoices", ce["CONSUMER_NEXT_URL"], port)
	}

	checkOwnSecretVolume(t, p, "consumer", args[initServiceSecretFile])

	// billing's networks: internal, shared with its caller and nginx alone.
	if len(b.Networks) == 0 {
		t.Fatal("billing is on no network")
	}
	for n := range b.Networks {
		if !p.Networks[n].Internal {
			t.Errorf("billing is on network %s, which is not internal: true", n)
		}
		var on []string
		for name, s := range p.Services {
			if _, ok := s.Networks[n]; ok {
				on = append(on, name)
			}
		}
		if slices.Sort(on); !slices.Equal(on, []string{"billing", "consumer", "nginx"}) {
			t.Errorf("network %s holds %v, want billing, its caller consumer and nginx (billing's way to the issuers) alone", n, on)
		}
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(b.Networks)), func(n string) bool { _, ok := c.Networks[n]; return ok }) {
		t.Error("billing shares no network with the consumer, which calls it")
	}
	conf, err := os.ReadFile(filepath.Join("nginx", "default.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "billing") {
		t.Error("nginx/default.conf names billing: no client may reach it but through the consumer")
	}
}
