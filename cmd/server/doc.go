// Package server composes the issuer and runs it: Serve is the whole
// lifecycle of `snowtoken serve`, from the environment to the last request.
//
// Start, in this order (each step's undo runs in reverse on the way out):
//
//	config.LoadEnv ─ logger ─ memory limit (memory.go) ─ listener
//	metrics listener (http.go) ─ Redis (redis.go; embedded in dev mode) ─ tracing
//	keys and clients files (files.go) ─ worker-ID lease and ID generator (ids.go)
//	session store ─ revocation-log follower and heartbeat writer (follow.go; in dev mode the log in process)
//	token.Service, from its options (service.go) ─ Redis settings check ─ auth-failure limiter
//	handlers.Server ─ reloader: SIGHUP and file changes (reload.go)
//	connection cap (connlimit.go) ─ http.Server.Serve
//
// Stop, on SIGTERM or SIGINT (shutdown.go):
//
//	readiness fails, answers say Connection: close   (SNOWTOKEN_SHUTDOWN_DRAIN)
//	listener closed, in-flight requests finished     (at most 15 s)
//	reloader, follower, store closed; the lease released with its high-water mark
package server
