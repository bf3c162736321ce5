package revfeed_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/handlers/revfeed/revfeedtest"
)

// discard is a ResponseWriter that counts what is written and keeps none.
type discard struct {
	h      http.Header
	status int
	n      int
}

func (d *discard) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (d *discard) WriteHeader(s int) { d.status = s }
func (d *discard) Write(p []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	d.n += len(p)
	return len(p), nil
}

// snapshotRequest is GET /revocations as the client "api" of is sends it.
func (is *issuer) snapshotRequest() *http.Request {
	req, _ := http.NewRequest(http.MethodGet, "/revocations?nonce="+testNonce, nil)
	req.SetBasicAuth("api", is.creds["api"])
	return req
}

// BenchmarkSnapshot serves GET /revocations through the handlers with
// 200,000 subject revocations: each of a new state (a revocation added
// before it: built), then of the same state, one at a time and 32 at once
// (as the consumers of a replica ask after an epoch rotation). It reports
// the time and allocations of a round, the body's size (body-B), how many
// were answered 200 and 503 a round, and the process's resident memory
// before a round, once the heap is collected and returned to the system
// (the state and the test's own: base-RSS-MB), and its peak while the round
// is served (peak-RSS-MB, VmHWM reset before each round).
func BenchmarkSnapshot(b *testing.B) {
	src := revfeedtest.NewLarge(revocation.KindSubject, 200_000)
	is := newIssuer(b, src, revfeed.Options{})
	b.Run("built", func(b *testing.B) {
		benchSnapshots(b, is, 1, func() { src.Add(revocation.KindToken, "117811659438825472", 1795700000000, 1795800000) })
	})
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("same-state/concurrent=%d", n), func(b *testing.B) { benchSnapshots(b, is, n, nil) })
	}
}

// benchSnapshots serves n snapshots at once a round, after before (if set).
func benchSnapshots(b *testing.B, is *issuer, n int, before func()) {
	h := is.server.Engine()
	var base, peak, ok, busy, size int
	for b.Loop() {
		b.StopTimer()
		if before != nil {
			before()
		}
		debug.FreeOSMemory()
		base = max(base, procStatus(b, "VmRSS"))
		resetPeakRSS(b)
		b.StartTimer()
		var wg sync.WaitGroup
		ws := make([]discard, n)
		for i := range ws {
			wg.Go(func() { h.ServeHTTP(&ws[i], is.snapshotRequest()) })
		}
		wg.Wait()
		peak = max(peak, procStatus(b, "VmHWM"))
		for _, w := range ws {
			switch w.status {
			case http.StatusOK:
				ok++
				size = w.n
			case http.StatusServiceUnavailable:
				busy++
			default:
				b.Fatalf("status %d", w.status)
			}
		}
	}
	b.ReportMetric(float64(size), "body-B")
	b.ReportMetric(float64(ok)/float64(b.N), "200/op")
	b.ReportMetric(float64(busy)/float64(b.N), "503/op")
	b.ReportMetric(float64(base)/(1<<20), "base-RSS-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MB")
}

// resetPeakRSS resets the process's VmHWM (Linux: clear_refs 5).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// procStatus is the field name (VmRSS, VmHWM) of /proc/self/status, in bytes.
func procStatus(b *testing.B, name string) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte(name+":")); ok {
			kb, err := strconv.Atoi(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))))
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s", name)
	return 0
}
