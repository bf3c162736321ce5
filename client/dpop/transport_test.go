package dpop_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// nonceServer is a server that requires DPoP proofs with its current nonce,
// as a token endpoint (POST /token: 400 use_dpop_nonce) and as a resource
// (GET /orders with Authorization: DPoP: 401 with a DPoP challenge). It
// checks every proof with a Checker for the URL it was sent to.
type nonceServer struct {
	*httptest.Server
	checker *dpop.Checker

	mu     sync.Mutex
	nonce  string
	hits   int
	proofs []*dpop.Proof // accepted
	bodies []string
}

func newNonceServer(t *testing.T, nonce string) *nonceServer {
	t.Helper()
	s := &nonceServer{nonce: nonce}
	s.checker = checker(t, dpop.Options{Nonce: func(n string, _ time.Time) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return n == s.nonce
	}})
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *nonceServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.hits++
	s.bodies = append(s.bodies, string(body))
	nonce := s.nonce
	s.mu.Unlock()
	req := dpop.Request{Method: r.Method, URL: s.URL + r.URL.Path}
	if scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " "); scheme == "DPoP" {
		req.AccessToken = tok
	}
	p, err := s.checker.Check(r.Context(), r.Header.Get("DPoP"), req, testNow)
	w.Header().Set("DPoP-Nonce", nonce)
	switch {
	case errors.Is(err, dpop.ErrUseNonce) && r.URL.Path == "/token":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"use_dpop_nonce","error_description":"send the nonce"}`))
	case errors.Is(err, dpop.ErrUseNonce):
		w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce", error_description="send the nonce"`)
		w.WriteHeader(http.StatusUnauthorized)
	case err != nil:
		http.Error(w, err.Error(), http.StatusUnauthorized)
	default:
		s.mu.Lock()
		s.proofs = append(s.proofs, p)
		s.mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	}
}

func (s *nonceServer) counts() (hits, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits, len(s.proofs)
}

func transport(t *testing.T) *dpop.Transport {
	t.Helper()
	p, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	return &dpop.Transport{Prover: p, Now: func() time.Time { return testNow }}
}

func do(t *testing.T, tr http.RoundTripper, req *http.Request) (int, string) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestTransportTokenEndpointNonce: a 400 use_dpop_nonce is retried once
// with the nonce and the same body; a second request uses the nonce at once.
func TestTransportTokenEndpointNonce(t *testing.T) {
	s := newNonceServer(t, "n-1")
	tr := transport(t)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/token?x=1", strings.NewReader("grant_type=client_credentials"))
	if code, body := do(t, tr, req); code != 200 || body != "ok" {
		t.Fatalf("got %d %q, want 200 ok", code, body)
	}
	if hits, ok := s.counts(); hits != 2 || ok != 1 {
		t.Errorf("%d requests, %d accepted; want 2, 1 (one retry)", hits, ok)
	}
	if req.Header.Get("DPoP") != "" {
		t.Error("the caller's request was changed")
	}
	req, _ = http.NewRequest(http.MethodPost, s.URL+"/token", strings.NewReader("grant_type=client_credentials"))
	if code, _ := do(t, tr, req); code != 200 {
		t.Fatalf("second request: %d", code)
	}
	if hits, ok := s.counts(); hits != 3 || ok != 2 {
		t.Errorf("%d requests, %d accepted; want 3, 2 (the nonce used without a retry)", hits, ok)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.bodies {
		if b != "grant_type=client_credentials" {
			t.Errorf("body %d: %q", i, b)
		}
	}
	if s.proofs[0].Nonce != "n-1" || s.proofs[0].URL != s.URL+"/token" {
		t.Errorf("proof %+v", s.proofs[0])
	}
}

// TestTransportResourceNonce: a 401 with a DPoP use_dpop_nonce challenge is
// retried with the nonce, and the proofs carry the token's ath (the server
// checks it); when the server moves to another nonce, one retry again.
func TestTransportResourceNonce(t *testing.T) {
	s := newNonceServer(t, "n-1")
	tr := transport(t)
	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/orders", nil)
		req.Header.Set("Authorization", "DPoP the.access.token")
		code, _ := do(t, tr, req)
		return code
	}
	if code := get(); code != 200 {
		t.Fatalf("got %d, want 200", code)
	}
	if hits, ok := s.counts(); hits != 2 || ok != 1 {
		t.Errorf("%d requests, %d accepted; want 2, 1", hits, ok)
	}
	s.mu.Lock()
	s.nonce = "n-2"
	s.mu.Unlock()
	if code := get(); code != 200 {
		t.Fatalf("after a new nonce: got %d, want 200", code)
	}
	if hits, ok := s.counts(); hits != 4 || ok != 2 {
		t.Errorf("%d requests, %d accepted; want 4, 2", hits, ok)
	}
}

// TestTransportNoRetryWithoutGetBody: a body that cannot be sent again is
// not retried: the caller gets the 400 and its whole body; the nonce is
// remembered for the next request all the same.
func TestTransportNoRetryWithoutGetBody(t *testing.T) {
	s := newNonceServer(t, "n-1")
	tr := transport(t)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/token", io.NopCloser(strings.NewReader("grant_type=client_credentials")))
	req.GetBody = nil
	code, body := do(t, tr, req)
	var e struct {
		Error string `json:"error"`
	}
	if code != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Error != "use_dpop_nonce" {
		t.Fatalf("got %d %q, want the 400 use_dpop_nonce", code, body)
	}
	if hits, _ := s.counts(); hits != 1 {
		t.Errorf("%d requests, want 1 (no retry)", hits)
	}
	req, _ = http.NewRequest(http.MethodPost, s.URL+"/token", io.NopCloser(strings.NewReader("grant_type=client_credentials")))
	req.GetBody = nil
	if code, _ := do(t, tr, req); code != 200 {
		t.Errorf("next request: got %d, want 200 with the nonce remembered", code)
	}
}

// TestTransportRetriesOnce: a server that wants another nonce every time
// gets two requests, and the caller its second answer.
func TestTransportRetriesOnce(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.Header().Set("DPoP-Nonce", strings.Repeat("n", hits))
		w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if code, _ := do(t, transport(t), req); code != 401 || hits != 2 {
		t.Errorf("got %d after %d requests, want 401 after 2", code, hits)
	}
}

func TestTransportWithoutProver(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	if _, err := (&dpop.Transport{}).RoundTrip(req); !errors.Is(err, dpop.ErrNoProver) {
		t.Errorf("got %v, want ErrNoProver", err)
	}
}
