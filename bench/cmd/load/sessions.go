package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// latencyProbe is the latency of validating a fixed set of tokens, closed loop.
type latencyProbe struct {
	live     int64
	p50, p99 time.Duration
}

// probeValidate validates each token times times with clients concurrent
// clients.
func probeValidate(issuerURL string, tokens []string, times, clients int) (latencyProbe, error) {
	lat := make([]time.Duration, 0, len(tokens)*times)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	for w := range clients {
		wg.Go(func() {
			for i := w; i < len(tokens)*times; i += clients {
				req, _ := http.NewRequest(http.MethodGet, issuerURL+"/token/validate", nil)
				req.Header.Set("Authorization", "Bearer "+tokens[i%len(tokens)])
				start := time.Now()
				resp, err := httpClient.Do(req)
				if err != nil {
					errc <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(start)
				if resp.StatusCode != http.StatusOK {
					errc <- fmt.Errorf("validate: %s", resp.Status)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return latencyProbe{}, err
	}
	slices.Sort(lat)
	return latencyProbe{p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}, nil
}

// usedMemory is used_memory of the benchmark Redis's INFO memory.
func usedMemory(redisPort int) (int64, error) {
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(redisPort), "INFO", "memory").Output()
	if err != nil {
		return 0, fmt.Errorf("redis-cli: %w", err)
	}
	m := regexp.MustCompile(`used_memory:(\d+)`).FindSubmatch(out)
	if m == nil {
		return 0, errors.New("no used_memory in INFO")
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// sessionsPhase grows Redis by -sessions sessions, reports the memory they
// take, and probes validate latency again. usedEmpty is used_memory of the
// empty Redis.
func sessionsPhase(issuerURL, basic string, redisPort int, usedEmpty int64, probeTokens []string, few latencyProbe) error {
	info := func() (used, keys int64, err error) {
		if used, err = usedMemory(redisPort); err != nil {
			return 0, 0, err
		}
		keys, err = dbsize(redisPort, 0)
		return used, keys, err
	}
	used0, keys0, err := info()
	if err != nil {
		return err
	}
	// Two views: the sessions added by this phase (the delta depends on where
	// Redis's hash tables were in their doubling when it began), and every
	// key against the empty Redis.
	fmt.Printf("\nRedis memory per live session (INFO used_memory; sessions issued through POST /token):\n\n")
	fmt.Println("| live sessions added | used_memory added | bytes per session added | keys live | used_memory above empty | bytes per key |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|")
	var issuedTotal int64
	start := time.Now()
	for _, target := range []int64{100_000, int64(*sessions)} {
		if target <= issuedTotal {
			continue
		}
		if err := issueN(issuerURL, basic, target-issuedTotal, nil); err != nil {
			return err
		}
		issuedTotal = target
		used, keys, err := info()
		if err != nil {
			return err
		}
		fmt.Printf("| %d | %d | %.1f | %d | %d | %.1f |\n", keys-keys0, used-used0, float64(used-used0)/float64(keys-keys0),
			keys, used-usedEmpty, float64(used-usedEmpty)/float64(keys))
	}
	fmt.Printf("\n(issued %d tokens in %v through HTTP: %.0f tokens/s with 64 clients, no wrk)\n", issuedTotal, time.Since(start).Round(time.Second), float64(issuedTotal)/time.Since(start).Seconds())
	_, keys, err := info()
	if err != nil {
		return err
	}
	many, err := probeValidate(issuerURL, probeTokens, 10, 8)
	if err != nil {
		return err
	}
	many.live = keys
	fmt.Printf("\nvalidate latency on the same %d tokens (8 clients, closed loop):\n\n", len(probeTokens))
	fmt.Println("| Redis keys live | p50 | p99 |")
	fmt.Println("|---:|---:|---:|")
	for _, p := range []latencyProbe{few, many} {
		fmt.Printf("| %d | %v | %v |\n", p.live, p.p50.Round(time.Microsecond), p.p99.Round(time.Microsecond))
	}
	return nil
}

// waitRedis waits until the benchmark's Redis answers.
func waitRedis(redisPort int) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if exec.Command("redis-cli", "-p", strconv.Itoa(redisPort), "PING").Run() == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("redis-server did not answer PING")
}

// dbsize is the number of keys in db of the benchmark's Redis (the
// issuer's is 0).
func dbsize(redisPort, db int) (int64, error) {
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(redisPort), "-n", strconv.Itoa(db), "DBSIZE").Output()
	if err != nil {
		return 0, fmt.Errorf("redis-cli: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
}
