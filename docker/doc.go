// Package docker holds no code: it is the Docker packaging of snowtoken
// (Dockerfile, docker-compose.yml, nginx/default.conf) and the tests that
// prove it without a Docker engine.
//
//   - compose_test.go loads docker-compose.yml with compose-go and checks the
//     stack: services, replicas, networks, the Redis password, pinned images,
//     limits, health checks, start order, and the issuer's environment
//     against config.Vars and config.Load; it runs the Redis service's script
//     and health check with the local sh and redis-server.
//   - dockerfile_test.go checks the Dockerfile's stages and runs its go build
//     lines, requiring byte-identical (reproducible) binaries.
//   - nginx_test.go runs nginx/default.conf in a real nginx in front of the
//     real issuer and consumer; resolve_test.go with a DNS server of its own,
//     to show nginx resolves issuer again without a reload.
//
// The consumer service is docker/consumer, its own package main.
package docker
