package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPollRefusal: pollRefusal validates until the first 401, counts the
// answers that are neither 200 nor 401 on the way, and records a token
// never refused within -revocation-timeout as such.
func TestPollRefusal(t *testing.T) {
	defer func(poll, timeout time.Duration) { *revocationPoll, *revocationTimeout = poll, timeout }(*revocationPoll, *revocationTimeout)
	*revocationPoll = 0
	for _, tc := range []struct {
		name    string
		answers []int // then the last one again and again
		timeout time.Duration
		want    refusal
	}{
		{"refused at once", []int{401}, time.Minute, refusal{refused: true, polls: 1}},
		{"refused at the fourth", []int{200, 200, 200, 401}, time.Minute, refusal{refused: true, polls: 4}},
		{"503 on the way", []int{200, 503, 503, 401}, time.Minute, refusal{refused: true, polls: 4, other: 2}},
		{"never", []int{200}, 20 * time.Millisecond, refusal{refused: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/token/validate" || r.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("got %s with %q", r.URL.Path, r.Header.Get("Authorization"))
				}
				i := min(int(n.Add(1)-1), len(tc.answers)-1)
				w.WriteHeader(tc.answers[i])
			}))
			defer ts.Close()
			*revocationTimeout = tc.timeout
			var got refusal
			t0 := time.Now()
			if err := pollRefusal(ts.URL+"/token/validate", "tok", t0, &got); err != nil {
				t.Fatal(err)
			}
			if got.refused != tc.want.refused || got.other != tc.want.other || (tc.want.refused && got.polls != tc.want.polls) {
				t.Errorf("refusal = %+v, want %+v", got, tc.want)
			}
			if got.refused && (got.after <= 0 || got.after > time.Since(t0)) {
				t.Errorf("after = %v, want within the %v the poll took", got.after, time.Since(t0))
			}
			if first := tc.answers[0] != http.StatusOK; got.refused && (got.accepted >= got.after || first != (got.accepted == 0)) {
				t.Errorf("accepted = %v with after %v, want below it, and 0 only if the first answer was not a 200", got.accepted, got.after)
			}
			if !got.refused && got.polls < 2 {
				t.Errorf("a token never refused was polled %d times", got.polls)
			}
		})
	}
}

// TestPrintRefusals: a validator of JWTs only counts the revocations it was
// polled for, and fails the run, like a replica, when it never refused one.
func TestPrintRefusals(t *testing.T) {
	vals := []validator{{name: "replica 1"}, {name: "consumer (follows replica 1)", jwtOnly: true}}
	refused := refusal{refused: true, after: 5 * time.Millisecond, polls: 2, accepted: time.Millisecond}
	results := func(consumerJWT refusal) [][]refusal {
		return [][]refusal{
			{refused, consumerJWT},
			{{opaque: true, refused: true, after: 3 * time.Millisecond, polls: 1}, {opaque: true, skipped: true}},
		}
	}
	row := func(out, name string) string {
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "| "+name+" |") {
				return line
			}
		}
		t.Fatalf("no row for %s in:\n%s", name, out)
		return ""
	}
	var out bytes.Buffer
	if err := printRefusals(&out, vals, results(refused), nil, 1000, time.Second); err != nil {
		t.Errorf("every token refused: %v", err)
	}
	if got := row(out.String(), "consumer (follows replica 1)"); !strings.HasPrefix(got, "| consumer (follows replica 1) | 1 | 1 | 5ms | 5ms (met) |") ||
		!strings.Contains(got, "| — |") {
		t.Errorf("consumer row: %s, want 1 revocation polled, refused, and no opaque p99", got)
	}
	if got := row(out.String(), "replica 1"); !strings.HasPrefix(got, "| replica 1 | 2 | 2 |") {
		t.Errorf("replica row: %s, want 2 revocations polled and refused", got)
	}
	out.Reset()
	err := printRefusals(&out, vals, results(refusal{polls: 9}), nil, 1000, time.Second)
	if err == nil || !strings.Contains(row(out.String(), "consumer (follows replica 1)"), "**MISSED**") {
		t.Errorf("the consumer never refused a token: err %v, row %s", err, row(out.String(), "consumer (follows replica 1)"))
	}
}
