// Package e2e holds the system tests: every test that runs snowtoken as a
// process (the binary built from the repository root) or in process through
// its entry point (cmd.Run, as main calls it), and the end-to-end tests of
// the client module against a real issuer. Unit tests stay beside their
// code.
//
// The shared helpers, by file:
//
//	entry_test.go     run, exitCode: the program in process
//	driver_test.go    issuer, the one driver of a running issuer: started in
//	                  process (startProgram) or as the binary, one replica
//	                  or many: a fleet (the binary and the credentials its
//	                  replicas share) starts each replica as a replica
//	                  value says (start: ready; launch: started), and
//	                  startIssuer is one with a fleet and Redis of its own;
//	                  spawnProc runs any other program (redis-server,
//	                  Prometheus, the example consumer); call, post, issue,
//	                  issueForm, validate, validateRaw, revoke, logs, stop
//	replicas_test.go  fleetBinary, fleetRedis, fleetCreds: replicas as
//	                  processes on one real redis-server
//	client_test.go    setup, issue: clienttest's issuer and a client.Validator
//
// By topic: the issuer end to end (program_test, issuer_test, logs_test,
// limits_test, authlimit_test), commands against running replicas (clientcmd_test,
// keyscmd_test, operations_*), live reload (reload_test), Redis faults and
// deployments (faults_test, redisloss_test, redisdeploy_test), the
// revocation log (revlog_e2e_test) and its cascade to exchanged tokens
// (cascade_e2e_test), DPoP with proofs of an independent
// library across two replicas and a gateway (dpop_test), tracing, monitoring (promrules_test:
// the alert rules with promtool and their runbooks; observability_test: the metrics
// reference against /metrics, a real Prometheus scraping a real replica), the README's examples
// (readme_test), and the client module (client_test, follow_test,
// consumer_test, example_test). The client module lives apart because it
// must not depend on the issuer; its own tests use fake JWKS and HTTP
// servers. Beside this package: e2e/docker, the Docker packaging's tests
// (the image, the Compose stack, nginx), and e2e/kubernetes, the
// manifests' test in a module of its own.
package e2e
