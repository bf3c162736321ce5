package docker

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeConsumerFollow: consumer-follow is the consumer's image, run as
// the consumer is (hardening, limits, the image's health check), following
// the revocation feed as the feed client init makes (CONSUMER_FEED_CLIENT_ID
// is init's -feed-client-id), with that client's secret from the one volume
// that holds it alone, read-only: never the secrets volume, which holds the
// signing key and the clients. It reaches the issuers through nginx, and
// checks the tokens' iss against the issuers' SNOWTOKEN_ISSUER; nginx routes
// /follow/orders to it without auth_request, which would ask the issuer
// about every request.
func TestComposeConsumerFollow(t *testing.T) {
	p := loadCompose(t, true)
	c, f, initSvc := service(t, p, "consumer"), service(t, p, "consumer-follow"), service(t, p, "init")
	checkRunsAsConsumer(t, p, "consumer-follow")
	if got := f.DependsOn["init"].Condition; got != types.ServiceConditionCompletedSuccessfully {
		t.Errorf("consumer-follow depends_on init %q, want %s", got, types.ServiceConditionCompletedSuccessfully)
	}
	if _, ok := service(t, p, "nginx").DependsOn["consumer-follow"]; !ok {
		t.Error("nginx does not depend on consumer-follow: nginx fails to start when an upstream name does not resolve")
	}

	e, ce := env(t, f), env(t, c)
	args := initCommand(t, initSvc)
	for k, want := range map[string]string{
		"SNOWTOKEN_ISSUER_URL":      ce["SNOWTOKEN_ISSUER_URL"], // the gateway
		"CONSUMER_ADDR":             ce["CONSUMER_ADDR"],
		"CONSUMER_ISSUER":           env(t, service(t, p, "issuer"))["SNOWTOKEN_ISSUER"],
		"CONSUMER_FEED_CLIENT_ID":   args[initFeedID],
		"CONSUMER_FEED_SECRET_FILE": args[initFeedSecretFile],
	} {
		if e[k] != want {
			t.Errorf("consumer-follow %s=%q, want %q", k, e[k], want)
		}
	}
	if _, ok := e["CONSUMER_PUBLIC_URL"]; ok {
		t.Error("consumer-follow sets CONSUMER_PUBLIC_URL: it takes bearer tokens (consumer-dpop is the DPoP example)")
	}
	checkOwnSecretVolume(t, p, "consumer-follow", args[initFeedSecretFile])

	conf, err := os.ReadFile(filepath.Join("nginx", "default.conf"))
	if err != nil {
		t.Fatal(err)
	}
	loc := regexp.MustCompile(`(?s)\n    location = /follow/orders \{(.*?)\n    \}`).FindSubmatch(conf)
	switch {
	case loc == nil:
		t.Fatal("nginx/default.conf has no location = /follow/orders")
	case !strings.Contains(string(loc[1]), "proxy_pass http://snowtoken_consumer_follow/orders;"):
		t.Error("nginx's /follow/orders does not pass /orders to consumer-follow (the prefix stripped)")
	case strings.Contains(string(loc[1]), "auth_request"):
		t.Error("nginx's /follow/orders has an auth_request: every request would reach the issuer")
	}
}

// checkOwnSecretVolume: the secret file init writes is in a volume of its
// own, which the service name mounts alone, read-only, and nothing else
// (init, writable, aside): never the volumes of the signing key and the
// clients, or of the Redis password, nor another service's secret.
func checkOwnSecretVolume(t *testing.T, p *types.Project, name, secretFile string) {
	t.Helper()
	s, initSvc := service(t, p, name), service(t, p, "init")
	dir := filepath.Dir(secretFile)
	sv, iv := volume(t, s, dir), volume(t, initSvc, dir)
	if len(s.Volumes) != 1 || sv.Type != types.VolumeTypeVolume || sv.Source != iv.Source || !sv.ReadOnly || iv.ReadOnly {
		t.Errorf("%s mounts %+v; want only init's %s volume %q, read-only", name, s.Volumes, dir, iv.Source)
	}
	args := initCommand(t, initSvc)
	written := 0 // the directories init writes into that are dir
	for _, f := range []string{args[initDir] + "/", args[initPasswordFile], args[initFeedSecretFile], args[initServiceSecretFile]} {
		if filepath.Dir(f) == dir {
			written++
		}
	}
	if written != 1 {
		t.Errorf("%s's secret is in %s, beside another file init writes, which %s must not read", name, dir, name)
	}
	for other, o := range p.Services {
		if other == "init" || other == name {
			continue
		}
		for _, v := range o.Volumes {
			if v.Source == iv.Source {
				t.Errorf("service %s mounts %s's secret volume %q", other, name, v.Source)
			}
		}
	}
}
