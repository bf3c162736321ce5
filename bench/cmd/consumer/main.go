// Command consumer is the consumer side of the load benchmark's
// production-volume round: a bare net/http handler, the same as cmd/bare,
// behind the client package's middleware in remote mode, so every request is
// validated through a client.Validator that asks the issuer (/healthz aside).
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/snowtoken/snowtoken/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18082", "listen address")
	issuer := flag.String("issuer", "http://127.0.0.1:8080", "the issuer's base URL")
	cacheTTL := flag.Duration("cache-ttl", time.Minute, "client.Options.CacheTTL: how long an answer of the issuer is reused (0: none)")
	flag.Parse()
	v, err := client.New(client.Options{IssuerURL: *issuer, CacheTTL: *cacheTTL})
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(`{"active":true,"sub":"bench","client_id":"bench","scope":"read"}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	mux := http.NewServeMux()
	mux.Handle("/", v.Middleware(h))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {}) // for the load tool to wait on
	log.Fatal(http.ListenAndServe(*addr, mux))
}
