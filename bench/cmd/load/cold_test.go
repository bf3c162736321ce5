package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// poolServer counts the bearer tokens it is sent, and answers 401 to the
// token neverSeenLua sends past a thread's tokens.
type poolServer struct {
	mu   sync.Mutex
	seen map[string]int
}

func (p *poolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	p.seen[tok]++
	p.mu.Unlock()
	if tok == "pool-exhausted" {
		w.WriteHeader(http.StatusUnauthorized)
	}
}

// writePool writes neverSeenLua for a pool of per tokens a wrk thread,
// as neverSeen.prepare does, and returns the script's name.
func writePool(t *testing.T, dir string, per int) string {
	t.Helper()
	prefix := filepath.Join(dir, "pool")
	for k := range wrkThreads {
		var b strings.Builder
		for i := range per {
			fmt.Fprintf(&b, "t%d-%d\n", k, i)
		}
		if err := os.WriteFile(fmt.Sprintf("%s-%d.txt", prefix, k), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(prefix+".lua", []byte(fmt.Sprintf(neverSeenLua, prefix)), 0o600); err != nil {
		t.Fatal(err)
	}
	return "pool.lua"
}

// TestNeverSeenLua runs wrk with the never-seen script against a server
// that counts tokens: with a pool larger than the run needs, no token is
// sent twice and check passes; with a pool it runs past, check fails.
func TestNeverSeenLua(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not on PATH")
	}
	for _, tc := range []struct {
		name   string
		per    int // tokens a thread
		wantOK bool
	}{{"large pool", 200_000, true}, {"small pool", 50, false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &poolServer{seen: map[string]int{}}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			dir := t.TempDir()
			script := writePool(t, dir, tc.per)
			n := &neverSeen{pool: tc.per * wrkThreads}
			out, err := exec.Command("wrk", "-t"+fmt.Sprint(wrkThreads), "-c4", "-d1s", "-s", filepath.Join(dir, script), ts.URL).CombinedOutput()
			if err != nil {
				t.Fatalf("wrk: %v: %s", err, out)
			}
			err = n.check(out)
			if (err == nil) != tc.wantOK {
				t.Fatalf("check: %v, want ok %v; wrk said:\n%s", err, tc.wantOK, out)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.seen) < 2 {
				t.Fatalf("server saw %d distinct tokens", len(srv.seen))
			}
			for tok, times := range srv.seen {
				if times > 1 && tok != "pool-exhausted" {
					t.Errorf("token %s sent %d times", tok, times)
				}
			}
		})
	}
}

func TestNeverSeenCheck(t *testing.T) {
	n := &neverSeen{pool: 100}
	for _, tc := range []struct {
		out    string
		wantOK bool
	}{
		{"pool: 100 requests built, 0 past their thread's tokens\n", true},
		{"pool: 101 requests built, 0 past their thread's tokens\n", false},
		{"pool: 90 requests built, 1 past their thread's tokens\n", false},
		{"Requests/sec: 1000\n", false}, // the script did not report
	} {
		if err := n.check([]byte(tc.out)); (err == nil) != tc.wantOK {
			t.Errorf("check(%q) = %v, want ok %v", tc.out, err, tc.wantOK)
		}
	}
}

// TestRunWrkChecksFirst: a check that fails fails the run with its own
// error, before wrk's non-2xx count does.
func TestRunWrkChecksFirst(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not on PATH")
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	defer ts.Close()
	_, err := runWrk(t.TempDir(), ts.URL, "", time.Second, os.Getpid(), 0, 0, func([]byte) error { return fmt.Errorf("the check") })
	if err == nil || !strings.Contains(err.Error(), "the check") {
		t.Fatalf("runWrk: %v, want the check's error", err)
	}
}
