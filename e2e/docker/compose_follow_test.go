package docker

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	if f.Image != c.Image || f.PullPolicy != types.PullPolicyNever || f.Build != nil {
		t.Errorf("consumer-follow image %q pull_policy %q build %v; want the consumer's image %q, never pulled, not built again", f.Image, f.PullPolicy, f.Build, c.Image)
	}
	if _, ok := f.DependsOn["consumer"]; !ok {
		t.Error("consumer-follow does not depend on consumer, which builds its image: docker-compose 1.29 may try to pull it")
	}
	for dep, cond := range map[string]string{"issuer": types.ServiceConditionHealthy, "init": types.ServiceConditionCompletedSuccessfully} {
		if got := f.DependsOn[dep].Condition; got != cond {
			t.Errorf("consumer-follow depends_on %s %q, want %s", dep, got, cond)
		}
	}
	if _, ok := service(t, p, "nginx").DependsOn["consumer-follow"]; !ok {
		t.Error("nginx does not depend on consumer-follow: nginx fails to start when an upstream name does not resolve")
	}
	if !f.ReadOnly || !slices.Equal(f.CapDrop, c.CapDrop) || !slices.Equal(f.SecurityOpt, c.SecurityOpt) {
		t.Errorf("consumer-follow read_only=%v cap_drop=%v security_opt=%v; want the consumer's hardening", f.ReadOnly, f.CapDrop, f.SecurityOpt)
	}
	if f.Deploy == nil || c.Deploy == nil || f.Deploy.Resources.Limits == nil || c.Deploy.Resources.Limits == nil ||
		f.Deploy.Resources.Limits.NanoCPUs != c.Deploy.Resources.Limits.NanoCPUs ||
		f.Deploy.Resources.Limits.MemoryBytes != c.Deploy.Resources.Limits.MemoryBytes {
		t.Error("consumer-follow's CPU and memory limits are not the consumer's")
	}
	if f.HealthCheck != nil || f.Restart != c.Restart || len(f.Ports) != 0 {
		t.Errorf("consumer-follow healthcheck %+v restart %q ports %v; want the image's health check, the consumer's restart, no port published", f.HealthCheck, f.Restart, f.Ports)
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
	// Its one volume: the feed secret's, shared with init, read-only here.
	feedDir := filepath.Dir(args[initFeedSecretFile])
	fv, iv := volume(t, f, feedDir), volume(t, initSvc, feedDir)
	if len(f.Volumes) != 1 || fv.Type != types.VolumeTypeVolume || fv.Source != iv.Source || !fv.ReadOnly || iv.ReadOnly {
		t.Errorf("consumer-follow mounts %+v; want only init's %s volume %q, read-only", f.Volumes, feedDir, iv.Source)
	}
	secretsDir, passwordFile := initArgs(t, initSvc)
	for _, other := range []string{secretsDir, filepath.Dir(passwordFile)} {
		if other == feedDir {
			t.Errorf("the feed secret is in %s, beside what consumer-follow must not read", other)
		}
	}
	for name, s := range p.Services {
		if name == "init" || name == "consumer-follow" {
			continue
		}
		for _, v := range s.Volumes {
			if v.Source == iv.Source {
				t.Errorf("service %s mounts the feed secret's volume %q", name, v.Source)
			}
		}
	}

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
