// Command bare is the baseline of the load benchmark: a bare net/http handler
// returning fixed JSON, the most any Go HTTP service can do on this machine.
//
// With -redis it is the floor of a validation instead: the same handler,
// which first reads one key with go-redis (a plain GET on the client's
// pool, as a service would write it), so that what a handler pays for
// waiting on one Redis round trip under net/http — the round trip, the
// goroutine parked and woken, net/http's background read of a connection
// whose handler blocks — reads off the load tool's table beside the issuer.
//
// With -extauthz it serves, instead, the floor of Envoy's ext_authz Check
// (extauthz.go): a bare grpc-go Authorization server that answers every
// CheckRequest OK with fixed identity headers.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	redisURL := flag.String("redis", "", "a redis:// URL: read one key per request before answering (empty: no Redis)")
	extAuthz := flag.Bool("extauthz", false, "serve a bare ext_authz gRPC Authorization server on -addr instead")
	flag.Parse()
	if *extAuthz {
		log.Fatal(serveExtAuthz(*addr))
	}
	body := []byte(`{"active":true,"sub":"bench","client_id":"bench","scope":"read"}`)
	var rdb *redis.Client
	if *redisURL != "" {
		opts, err := redis.ParseURL(*redisURL)
		if err != nil {
			log.Fatal(err)
		}
		rdb = redis.NewClient(opts)
		if err := rdb.Set(context.Background(), "bare:key", "1", 0).Err(); err != nil {
			log.Fatal(err)
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rdb != nil {
			if err := rdb.Get(r.Context(), "bare:key").Err(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, h))
}
