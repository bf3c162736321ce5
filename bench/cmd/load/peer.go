package main

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"strconv"
	"time"
)

// The peer: a go-oauth2/oauth2 v4 server with its Redis token
// store (cmd/peer), the library a user would pick instead, measured in the
// same run as snowtoken and the bare handler, on the same redis-server in a
// db of its own.

var withPeer = flag.Bool("peer", true, "also measure the go-oauth2/oauth2 v4 peer (cmd/peer) beside snowtoken")

const (
	peerDB       = 1
	peerClientID = "peer"
	// peerAlg is how the peer signs its JWT access tokens, as cmd/peer's
	// doc comment says: EdDSA (Ed25519), like snowtoken, so the peer's issue
	// row has the same floor as snowtoken's JWT issue (bare + sign). Its
	// validation reads its store and verifies no signature: floor bare.
	peerAlg = "EdDSA"
	// peerMemoryNote says why the peer's sessions take fewer keys than
	// its two a token.
	peerMemoryNote = "each token is a record key and an access-token key, but the library's JWT has no jti nor iat, so the tokens " +
		"issued to one client within one second are the same string and share one access-token key (cmd/peer's doc comment): " +
		"the records are per issue, the access-token keys per second"
	// peerPrefix starts the peer's row names.
	peerPrefix = "go-oauth2 v4: "
)

// peer is a running cmd/peer and a client of its own.
type peer struct {
	*proc
	url, basic string
}

// startPeer starts bin on loopback with a new client and waits until it
// issues a token.
func startPeer(dir, bin string, redisPort int) (*peer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	secret := rand.Text()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := start(dir, bin, nil, "-addr", addr, "-redis", fmt.Sprintf("redis://127.0.0.1:%d/%d", redisPort, peerDB),
		"-client-id", peerClientID, "-client-secret", secret, "-scope", "read write")
	if err != nil {
		return nil, err
	}
	pr := &peer{proc: p, url: "http://" + addr, basic: "Basic " + base64.StdEncoding.EncodeToString([]byte(peerClientID+":"+secret))}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := issue(pr.url, pr.basic)
		if err == nil {
			return pr, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("peer did not issue a token: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
