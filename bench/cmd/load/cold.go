package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/snowtoken/snowtoken/token"
)

// Never-seen validation (issues 16 and 19): JWTs that no request has
// validated before, with the issuer's verified-token cache full, so that
// every request parses and verifies its token afresh and the cache evicts
// an entry for it, as in a deployment whose services see a steady stream of
// new tokens.

const (
	// cacheFill is how many tokens fill the issuer's verified-token cache
	// past its size: the load tool leaves SNOWTOKEN_CACHE_SIZE at its
	// default, token.DefaultCacheSize entries.
	cacheFill = token.DefaultCacheSize + token.DefaultCacheSize/10
	// poolMargin is how many times the requests of the same round's hot
	// validate run a never-seen run gets in tokens. A never-seen request
	// costs more than a hot one, so 1 would do if wrk's two threads kept
	// pace with each other; the rest is for one thread running ahead of
	// the other, and neverSeen.check fails the run if it was not enough.
	poolMargin = 1.5
)

// fillCache issues cacheFill tokens and validates each once, so that the
// issuer's verified-token cache is full of tokens that later runs do not
// use. It returns the tokens, the last validated last.
func fillCache(issuerURL, basic string) ([]string, error) {
	fmt.Printf("issuing %d tokens and validating each once to fill the verified-token cache (%d entries) past its size\n",
		cacheFill, token.DefaultCacheSize)
	filled := make([]string, cacheFill)
	if err := issueN(issuerURL, basic, int64(len(filled)), filled); err != nil {
		return nil, err
	}
	return filled, validateEach(issuerURL, filled)
}

// validateEach validates each of tokens once through url with 64 clients,
// closed loop, and prints what that took.
func validateEach(url string, tokens []string) error {
	start := time.Now()
	probe, err := probeValidate(url, tokens, 1, 64)
	if err != nil {
		return err
	}
	fmt.Printf("(%d validated through %s in %v, 64 clients closed loop: p50 %v, p99 %v)\n", len(tokens), url,
		time.Since(start).Round(time.Second), probe.p50.Round(time.Microsecond), probe.p99.Round(time.Microsecond))
	return nil
}

// neverSeen makes the wrk script of each round's never-seen validate run:
// a pool of tokens issued for that round alone, before it and unmeasured,
// one file for each wrk thread, so that every request takes a token that no
// request (of this run, of another thread, of another round, or the cache's
// fill) has used. The pool is the hot validate run's requests of the same
// round times poolMargin, and check fails the run if it ran out.
type neverSeen struct {
	dir, issuerURL, basic string
	hot                   *row // hot validate, earlier in the same round
	pool                  int  // tokens of the latest round's pool
}

// neverSeenLua hands each wrk thread (by setup) its own file of tokens and
// each request the thread's next token; a request past the file's end gets
// a token that fails, and done counts the requests built past their
// thread's tokens, so that neverSeen.check can tell.
const neverSeenLua = `local threads = {}
setup = function(thread)
  thread:set("k", #threads)
  threads[#threads + 1] = thread
end
init = function()
  tokens, used, past = {}, 0, 0
  for line in io.lines(string.format("%s-%%d.txt", k)) do tokens[#tokens + 1] = line end
end
request = function()
  used = used + 1
  local t = tokens[used]
  if t == nil then
    past = past + 1
    t = "pool-exhausted"
  end
  return wrk.format("GET", nil, { Authorization = "Bearer " .. t })
end
done = function()
  local used, past = 0, 0
  for _, t in ipairs(threads) do
    used, past = used + t:get("used"), past + t:get("past")
  end
  io.write(string.format("pool: %%d requests built, %%d past their thread's tokens\n", used, past))
end
`

// prepare issues round's pool and writes its files and script.
func (n *neverSeen) prepare(round int) (string, error) {
	hot := n.hot.all[round].rps * duration.Seconds()
	per := int(hot*poolMargin/wrkThreads) + 1
	tokens := make([]string, per*wrkThreads)
	start := time.Now()
	if err := issueN(n.issuerURL, n.basic, int64(len(tokens)), tokens); err != nil {
		return "", err
	}
	fmt.Printf("(never-seen run of round %d: a pool of %d tokens, %g× the %.0f requests of hot validate, issued in %v)\n",
		round+1, len(tokens), poolMargin, hot, time.Since(start).Round(time.Second))
	prefix := filepath.Join(n.dir, "never-seen-"+strconv.Itoa(round))
	for t := range wrkThreads {
		file := fmt.Sprintf("%s-%d.txt", prefix, t)
		if err := os.WriteFile(file, []byte(strings.Join(tokens[t*per:(t+1)*per], "\n")+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(prefix+".lua", []byte(fmt.Sprintf(neverSeenLua, prefix)), 0o600); err != nil {
		return "", err
	}
	n.pool = len(tokens)
	return filepath.Base(prefix) + ".lua", nil
}

var poolRe = regexp.MustCompile(`pool: (\d+) requests built, (\d+) past their thread's tokens`)

// check fails unless wrk's output (of neverSeenLua) shows that every
// request of the run had a token of its own from the pool.
func (n *neverSeen) check(out []byte) error {
	m := poolRe.FindSubmatch(out)
	if m == nil {
		return errors.New("never-seen run: the script printed no pool line")
	}
	built, _ := strconv.Atoi(string(m[1]))
	past, _ := strconv.Atoi(string(m[2]))
	if past > 0 || built > n.pool {
		return fmt.Errorf("never-seen run: %d requests for a pool of %d tokens, %d of them past their wrk thread's share: "+
			"the pool ran out (raise poolMargin)", built, n.pool, past)
	}
	return nil
}
