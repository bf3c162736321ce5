package main

import (
	"fmt"
	"io"
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

// poolServer counts the pooled values it is sent (in the DPoP header, or
// at the body's end after "&v=", with the request that freshPool's script
// must carry them with), and answers 401 to the value poolLua sends past a
// thread's values, or to a request that is not the one the pool was given.
type poolServer struct {
	mu     sync.Mutex
	inBody bool // the values come at the body's end, not in the header
	seen   map[string]int
	bad    int // requests that are not POST /x with X-Fixed and the body
}

func (p *poolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	body, v := string(b), ""
	ok := r.Header.Get("DPoP") != ""
	if p.inBody {
		body, v, ok = strings.Cut(body, "&v=")
		ok = ok && r.Header.Get("DPoP") == ""
	} else {
		v, _ = strings.CutPrefix(r.Header.Get("DPoP"), "v=")
	}
	p.mu.Lock()
	p.seen[v]++
	ok = ok && r.Method == "POST" && r.URL.Path == "/x" && r.Header.Get("X-Fixed") == "yes" && body == "a=1&b=2" &&
		r.ContentLength == int64(len(b))
	if !ok {
		p.bad++
	}
	p.mu.Unlock()
	if v == "pool-exhausted" || !ok {
		w.WriteHeader(http.StatusUnauthorized)
	}
}

// testPool is a freshPool of values "r<round>-<i>", sized for rps
// requests/s over -d, in the DPoP header or (inBody) at the body's end.
func testPool(dir string, rps float64, inBody bool) *freshPool {
	ref := &row{name: "ref", all: []wrkResult{{rps: rps}}}
	s := slot{header: "DPoP", prefix: "v="}
	if inBody {
		s = slot{prefix: "&v="}
	}
	p := &freshPool{name: "pool", req: httpReq{method: "POST", path: "/x", body: "a=1&b=2", header: [][2]string{{"X-Fixed", "yes"}}},
		slot: s, refs: []*row{ref},
		values: func(round, n int) ([]string, error) {
			v := make([]string, n)
			for i := range v {
				v[i] = fmt.Sprintf("r%d-%d", round, i)
			}
			return v, nil
		}}
	poolRow(dir, &row{name: "pooled"}, p)
	return p
}

// TestPoolLua runs wrk with a pool's script against a server that counts
// values, in a header and at the body's end: with a pool larger than the
// run needs, every request is the pool's request (its Content-Length
// right) and no value is sent twice, and check passes; with a pool it runs
// past, check fails.
func TestPoolLua(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not on PATH")
	}
	for _, tc := range []struct {
		name   string
		rps    float64 // the reference's, which sizes the pool over -d (10 s)
		inBody bool
		wantOK bool
	}{{"large pool", 40_000, false, true}, {"small pool", 5, false, false},
		{"large pool, in the body", 40_000, true, true}, {"small pool, in the body", 5, true, false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &poolServer{seen: map[string]int{}, inBody: tc.inBody}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			dir := t.TempDir()
			p := testPool(dir, tc.rps, tc.inBody)
			script, err := p.prepare(0)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("wrk", "-t"+fmt.Sprint(wrkThreads), "-c4", "-d1s", "-s", filepath.Join(dir, script), ts.URL+"/x").CombinedOutput()
			if err != nil {
				t.Fatalf("wrk: %v: %s", err, out)
			}
			err = p.check(out)
			if (err == nil) != tc.wantOK {
				t.Fatalf("check: %v, want ok %v; wrk said:\n%s", err, tc.wantOK, out)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.seen) < 2 || srv.bad > 0 {
				t.Fatalf("server saw %d distinct values and %d requests not the pool's", len(srv.seen), srv.bad)
			}
			for v, times := range srv.seen {
				if times > 1 && v != "pool-exhausted" {
					t.Errorf("value %s sent %d times", v, times)
				}
			}
		})
	}
}

func TestPoolCheck(t *testing.T) {
	p := testPool(t.TempDir(), 1, false)
	p.pool = 100
	for _, tc := range []struct {
		out    string
		wantOK bool
	}{
		{"pool: 100 requests built, 0 past their thread's values\n", true},
		{"pool: 101 requests built, 0 past their thread's values\n", false},
		{"pool: 90 requests built, 1 past their thread's values\n", false},
		{"Requests/sec: 1000\n", false}, // the script did not report
	} {
		if err := p.check([]byte(tc.out)); (err == nil) != tc.wantOK {
			t.Errorf("check(%q) = %v, want ok %v", tc.out, err, tc.wantOK)
		}
	}
}

// TestPoolSize: a pool holds poolMargin times the requests of the fastest
// of its references in the round and of its own row in the round before.
func TestPoolSize(t *testing.T) {
	p := testPool(t.TempDir(), 1000, false)
	if _, err := p.size(1); err == nil {
		t.Error("size of round 2 with no reference and no round 1: no error")
	}
	p.own.all = []wrkResult{{rps: 3000}}
	for round, want := range []float64{1000, 3000} {
		got, err := p.size(round)
		if w := int(want*duration.Seconds()*poolMargin) + wrkThreads; err != nil || got != w {
			t.Errorf("size(%d) = %d, %v, want %d", round, got, err, w)
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
