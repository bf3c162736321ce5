// Package docker holds the tests of snowtoken's Docker packaging, which is
// in the docker folder at the repository root (Dockerfile,
// docker-compose.yml, nginx/default.conf, caddy/, traefik/, standin/), most
// of them without a Docker engine. They run in that folder (TestMain) and
// read its files by their relative names.
//
//   - observability_test.go checks the profile observability (prometheus
//     and grafana) as files: images, limits, networks, and that each mounts
//     what the other files name (the rules, the dashboards, the data source).
//   - compose_test.go (and compose_follow_test.go, for consumer-follow;
//     compose_chain_test.go, for the call chain consumer -> billing) loads docker-compose.yml with compose-go and checks the
//     stack: services, replicas, networks, the Redis password, pinned images,
//     limits, health checks, start order, and the issuer's environment
//     against config.Vars and config.Load; it runs the Redis service's script
//     and health check with the local sh and redis-server.
//   - dockerfile_test.go checks the Dockerfile's stages and runs its go build
//     lines, requiring byte-identical (reproducible) binaries.
//   - nginx_test.go runs nginx/default.conf in a real nginx in front of the
//     real issuer and consumer, and in front of replicas one of which answers
//     503, which nginx retries on another (POST /token and auth_request too);
//     nginx_dpop_test.go with DPoP-bound tokens, through auth_request and to
//     the consumer with CONSUMER_PUBLIC_URL (consumer-dpop); resolve_test.go
//     with a DNS server of its own, to show nginx resolves issuer again
//     without a reload.
//   - gateway_test.go runs the three gateway configurations, nginx's
//     auth_request (nginx/default.conf), Caddy's forward_auth
//     (caddy/Caddyfile) and Traefik's ForwardAuth (traefik/*.yml), in the
//     real proxies (proxies_test.go starts them) in front of the real
//     issuer, with one table of requests: the issuer's identity headers
//     reach the upstream, never a client's; every refusal passes the
//     issuer's status and challenge on. Caddy is Debian's
//     (SNOWTOKEN_TEST_REQUIRE_CADDY=1 in CI); Traefik runs where a machine
//     has it (SNOWTOKEN_TEST_TRAEFIK), since it does not build here.
//   - stack_test.go, under SNOWTOKEN_TEST_REQUIRE_DOCKER=1 (as CI runs it),
//     builds the images and brings docker-compose.yml up for real (as
//     project snowtoken-stacktest, on 127.0.0.1:8080, with `docker compose`,
//     v2, or else Debian's docker-compose 1.29; SNOWTOKEN_TEST_COMPOSE picks
//     one): a token issued through nginx, accepted by the consumer; a
//     DPoP-bound one accepted by consumer-dpop, refused as Bearer; three
//     replicas with distinct worker IDs; the profile observability's
//     Prometheus scraping them, every rule and dashboard query running there;
//     consumer-follow (stack_follow_test.go) answering 200 requests with no
//     call to the issuers (their /token/validate count, read from each
//     replica's metrics, does not move) and refusing a token revoked through
//     the gateway within 100 ms of the revoke request, the time logged;
//     the call chain (stack_chain_test.go): the consumer and billing see one
//     Txn-Token, billing's caller the consumer's own client, a client's
//     Txn-Token replaced by nginx's; one of them cut off from Redis, no request through nginx failing, and
//     SnowtokenRedisUnreachable's expression holding for it; that one
//     killed, the others serving.
//     Without the variable it skips, naming what it needs; with it, a missing
//     engine, Compose or tool of standin/build.sh fails it by name.
//
// The stack test builds with what the Dockerfile and the Compose file name,
// as they are. Of the pinned base images (golang, distroless, redis,
// nginx, prometheus), standin/build.sh first makes each one missing here a local stand-in,
// under exactly its name, from this host's binaries: Go with a file://
// module mirror, Debian's redis-server and nginx, busybox. They are test
// fixtures, labelled snowtoken.standin: production pulls the real images,
// and the script never replaces a real image of the same name.
//
// The consumer service is the client module's example consumer
// (client/example/consumer), built from the root module, which requires the
// client module through a replace.
package docker
