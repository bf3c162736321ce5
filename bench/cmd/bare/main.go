// Command bare is the baseline of the load benchmark: a bare net/http handler
// returning fixed JSON, the most any Go HTTP service can do on this machine.
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	flag.Parse()
	body := []byte(`{"active":true,"sub":"bench","client_id":"bench","scope":"read"}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, h))
}
