package jwk

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxBytes bounds the body Get reads when given no bound.
const DefaultMaxBytes = 256 << 10

// Get sends req, a GET of a key set or a discovery document, with client,
// and returns its body, which must answer 200 and be at most maxBytes
// (zero means DefaultMaxBytes), and the max-age of its Cache-Control
// (MaxAge). It asks for JSON unless
// req names an Accept. Its errors name the URL and what failed; the
// caller wraps them with the kind it answers with. The client's own rules
// apply: its timeouts, its redirects, the addresses it may dial.
func Get(client *http.Client, req *http.Request, maxBytes int64) ([]byte, time.Duration, error) {
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/jwk-set+json, application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	u := req.URL.Redacted()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("%s answered %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", u, err)
	}
	if int64(len(body)) > maxBytes {
		return nil, 0, fmt.Errorf("%s: answer larger than %d bytes", u, maxBytes)
	}
	return body, MaxAge(resp.Header), nil
}

// MaxAge is the max-age of h's Cache-Control: zero if it gives none; a
// nanosecond, stale at once, if it says no-store, no-cache or max-age=0
// (a Cache then fetches as often as its MinRefresh allows).
func MaxAge(h http.Header) time.Duration {
	var age time.Duration
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				return time.Nanosecond
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64)
				switch {
				case err != nil, n < 0:
				case n == 0:
					return time.Nanosecond
				default:
					age = time.Duration(min(n, 1<<32)) * time.Second
				}
			}
		}
	}
	return age
}
