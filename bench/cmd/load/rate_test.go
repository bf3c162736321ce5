package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestHTTPReqRaw: the bytes constantRate writes are the request itself.
func TestHTTPReqRaw(t *testing.T) {
	for _, r := range []httpReq{bareRequest, issueRequest("Basic YTpi"), validateRequest("tok"), introspectRequest("Basic YTpi", "tok")} {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(r.raw())))
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		body, _ := io.ReadAll(req.Body)
		if req.Method != r.method || req.URL.Path != r.path || string(body) != r.body {
			t.Errorf("%q read as %s %s %q", r.raw(), req.Method, req.URL.Path, body)
		}
		for _, h := range r.header {
			if got := req.Header.Get(h[0]); got != h[1] {
				t.Errorf("%s %s: %s is %q, want %q", r.method, r.path, h[0], got, h[1])
			}
		}
	}
}

func TestHTTPReqLua(t *testing.T) {
	got := issueRequest("Basic YTpi").lua()
	want := `wrk.method = "POST"
wrk.path = "/token"
wrk.body = "grant_type=client_credentials&scope=read"
wrk.headers["Authorization"] = "Basic YTpi"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
`
	if got != want {
		t.Errorf("lua:\n%s\nwant:\n%s", got, want)
	}
}

func TestWithField(t *testing.T) {
	got, err := withField(`{"id":"b","secret_sha256":"ab","scopes":["read","write"]}`, "token_format", "opaque")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ID          string   `json:"id"`
		Scopes      []string `json:"scopes"`
		TokenFormat string   `json:"token_format"`
		Feed        bool     `json:"revocation_feed"`
	}
	if err := json.Unmarshal([]byte(got), &c); err != nil || c.ID != "b" || len(c.Scopes) != 2 || c.TokenFormat != "opaque" {
		t.Errorf("withField = %s (%+v, %v)", got, c, err)
	}
	if got, err = withField(got, "revocation_feed", true); err != nil || json.Unmarshal([]byte(got), &c) != nil || !c.Feed || c.TokenFormat != "opaque" {
		t.Errorf("withField(revocation_feed) = %s (%+v, %v)", got, c, err)
	}
	if _, err := withField("client_secret: x", "token_format", "opaque"); err == nil {
		t.Error("withField took a line that is not JSON")
	}
}

func TestVsFloor(t *testing.T) {
	if got := vsFloor(152, 100, 1.6); got != "1.52× (≤1.6)" {
		t.Errorf("vsFloor = %q", got)
	}
	if got := vsFloor(100, 100, 0); got != "1.00×" {
		t.Errorf("vsFloor without a target = %q", got)
	}
}

// TestOpenLoopStops: once stop is closed openLoop schedules no more, and
// returns the requests it scheduled, each answered.
func TestOpenLoopStops(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) }))
	defer ts.Close()
	stop := make(chan struct{})
	var once sync.Once
	const total = 1_000_000 // 1000 s at 1000 requests/s
	req := []byte(bareRequest.raw())
	lat, failed, err := openLoop(1000, total, strings.TrimPrefix(ts.URL, "http://"), func(i int) []byte {
		if i == 50 {
			once.Do(func() { close(stop) })
		}
		return req
	}, stop)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lat); n == 0 || n >= total || len(failed) != n {
		t.Fatalf("openLoop stopped after %d requests (%d failed flags), want some and fewer than %d", n, len(failed), total)
	}
	for i, f := range failed {
		if f || lat[i] <= 0 {
			t.Fatalf("request %d: failed %v, latency %v", i, f, lat[i])
		}
	}
}
