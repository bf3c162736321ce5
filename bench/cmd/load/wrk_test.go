package main

import "testing"

// TestWrkParse: requests/s and the request count are read from their own
// lines (the CPU per request divides by the count; a count read as the
// rate made every rate -d times too high), and the percentiles and
// non-2xx responses too.
func TestWrkParse(t *testing.T) {
	out := []byte(`Running 6s test @ http://127.0.0.1:39705/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.81ms    2.42ms  21.86ms   86.49%
    Req/Sec    32.02k     4.42k   42.75k    68.33%
  Latency Distribution
     50%    1.10ms
     75%    2.01ms
     90%    4.20ms
     99%    7.88ms
  381657 requests in 6.01s, 62.44MB read
  Non-2xx or 3xx responses: 3
Requests/sec:  63504.49
Transfer/sec:     10.39MB
`)
	var r wrkResult
	if err := r.parse(out); err != nil {
		t.Fatal(err)
	}
	if r.rps != 63504.49 || r.requests != 381657 || r.p50 != "1.10ms" || r.p99 != "7.88ms" || r.non2xx != 3 {
		t.Errorf("parse = %+v", r)
	}
	if err := new(wrkResult).parse([]byte("unable to connect to 127.0.0.1:1 Connection refused")); err == nil {
		t.Error("parse took output without a rate")
	}
}
