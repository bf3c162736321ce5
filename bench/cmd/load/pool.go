package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A fresh pool feeds a wrk run with values that no other request uses:
// never-seen tokens (cold.go), DPoP proofs (dpop.go), client assertions
// (assertion.go). wrk replays one
// request, so each round's values are made for that round alone, before it
// and unmeasured, and split into one file for each wrk thread; each request
// takes its thread's next value, so no value serves two requests (of this
// run, of another thread or of another round). The pool is sized from the
// requests/s that rows measured already (poolMargin times the most of the
// reference rows in this round and of its own row in the round before), and
// check fails the run if it ran out.

// poolMargin is how many times the requests expected of a run a pool holds:
// the rest is for one wrk thread running ahead of the other, and for a run
// faster than its reference; freshPool.check fails a run that ran out.
const poolMargin = 1.5

// freshPool makes and checks the fresh values of one row's runs.
type freshPool struct {
	dir, name string
	// req is the request, less the pooled value; slot is where the values
	// go in it.
	req  httpReq
	slot slot
	// refs are rows measured earlier in each round whose requests/s bound
	// this row's; own is this row, whose previous round counts too.
	refs []*row
	own  *row
	// values makes n values for round.
	values func(round, n int) ([]string, error)
	pool   int // values of the latest round
}

// slot is where a pooled value goes in a request: in header, after prefix
// ("Bearer "); or, header empty, at the end of the body, after prefix
// ("&client_assertion=").
type slot struct{ header, prefix string }

// fill is req with v in its slot; req itself is left as it was.
func (s slot) fill(req httpReq, v string) httpReq {
	if s.header == "" {
		req.body += s.prefix + v
		return req
	}
	req.header = append(req.header[:len(req.header):len(req.header)], [2]string{s.header, s.prefix + v})
	return req
}

// lua is the Lua statement that puts v in the slot of the header table h
// or of the string body.
func (s slot) lua() string {
	if s.header == "" {
		return "body = body .. " + strconv.Quote(s.prefix) + " .. v"
	}
	return "h[" + strconv.Quote(s.header) + "] = " + strconv.Quote(s.prefix) + " .. v"
}

// poolLua hands each wrk thread (by setup) its own file of values and each
// request the thread's next one, in the request's slot;
// a request past the file's end gets a value that fails, and done counts
// the requests built past their thread's values, so that freshPool.check
// can tell. The placeholders are filled by freshPool.script.
const poolLua = `local threads = {}
setup = function(thread)
  thread:set("k", #threads)
  threads[#threads + 1] = thread
end
init = function()
  values, used, past = {}, 0, 0
  for line in io.lines(string.format({{prefix}} .. "-%d.txt", k)) do values[#values + 1] = line end
end
request = function()
  used = used + 1
  local v = values[used]
  if v == nil then
    past = past + 1
    v = "pool-exhausted"
  end
  local h, body = {{headers}}, {{body}}
  {{put}}
  if body == "" then body = nil end
  return wrk.format({{method}}, nil, h, body)
end
done = function()
  local used, past = 0, 0
  for _, t in ipairs(threads) do
    used, past = used + t:get("used"), past + t:get("past")
  end
  io.write(string.format("pool: %d requests built, %d past their thread's values\n", used, past))
end
`

// script is poolLua for the files under prefix.
func (p *freshPool) script(prefix string) string {
	var h strings.Builder
	h.WriteString("{")
	for _, kv := range p.req.header {
		fmt.Fprintf(&h, "[%q] = %q, ", kv[0], kv[1])
	}
	h.WriteString("}")
	return strings.NewReplacer("{{prefix}}", strconv.Quote(prefix), "{{headers}}", h.String(), "{{put}}", p.slot.lua(),
		"{{method}}", strconv.Quote(p.req.method), "{{body}}", strconv.Quote(p.req.body)).Replace(poolLua)
}

// size is how many values round needs.
func (p *freshPool) size(round int) (int, error) {
	rps := 0.0
	for _, r := range p.refs {
		if len(r.all) > round {
			rps = max(rps, r.all[round].rps)
		}
	}
	if round > 0 && len(p.own.all) >= round {
		rps = max(rps, p.own.all[round-1].rps)
	}
	if rps == 0 {
		return 0, fmt.Errorf("%s: no row measured before it to size its pool", p.own.name)
	}
	return int(rps*duration.Seconds()*poolMargin) + wrkThreads, nil
}

// prepare makes round's values and writes their files and the script.
func (p *freshPool) prepare(round int) (string, error) {
	n, err := p.size(round)
	if err != nil {
		return "", err
	}
	per := n / wrkThreads
	start := time.Now()
	values, err := p.values(round, per*wrkThreads)
	if err != nil {
		return "", err
	}
	fmt.Printf("(%s, round %d: a pool of %d, %g× the requests expected, made in %v)\n",
		p.own.name, round+1, len(values), poolMargin, time.Since(start).Round(time.Second))
	prefix := filepath.Join(p.dir, p.name+"-"+strconv.Itoa(round))
	for t := range wrkThreads {
		file := fmt.Sprintf("%s-%d.txt", prefix, t)
		if err := os.WriteFile(file, []byte(strings.Join(values[t*per:(t+1)*per], "\n")+"\n"), 0o600); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(prefix+".lua", []byte(p.script(prefix)), 0o600); err != nil {
		return "", err
	}
	p.pool = len(values)
	return filepath.Base(prefix) + ".lua", nil
}

var poolRe = regexp.MustCompile(`pool: (\d+) requests built, (\d+) past their thread's values`)

// check fails unless wrk's output (of poolLua) shows that every request of
// the run had a value of its own from the pool.
func (p *freshPool) check(out []byte) error {
	m := poolRe.FindSubmatch(out)
	if m == nil {
		return errors.New(p.own.name + ": the script printed no pool line")
	}
	built, _ := strconv.Atoi(string(m[1]))
	past, _ := strconv.Atoi(string(m[2]))
	if past > 0 || built > p.pool {
		return fmt.Errorf("%s: %d requests for a pool of %d, %d of them past their wrk thread's share: "+
			"the pool ran out (raise poolMargin)", p.own.name, built, p.pool, past)
	}
	return nil
}

// poolRow is a wrk row whose requests take their values from a freshPool
// of p's fields (own and dir are set here), sized from refs.
func poolRow(dir string, r *row, p *freshPool) *row {
	p.dir, p.own = dir, r
	r.prepare, r.check = p.prepare, p.check
	return r
}

// freshSource is an endpoint's fresh values, one a request, in the wrk
// table (a freshPool a round) and in the constant-rate table: DPoP proofs
// (dpop.go), client assertions (assertion.go).
type freshSource struct {
	// req is the request, less the value; slot is where the value goes.
	req  httpReq
	slot slot
	// values makes n values for a run of d, or fails if the oldest would
	// no longer be accepted at the run's end (makeFresh).
	values func(n int, d time.Duration) ([]string, error)
	// sizedBy names the rows measured before this one in each round whose
	// requests/s bound its own, to size its wrk pool.
	sizedBy []string
	// profile: under -pprof, take the issuer's CPU profile during the
	// row's last wrk round (profile.go).
	profile bool
}

// pool is the wrk pool of src's values for row r, sized from refs.
func (src *freshSource) pool(dir string, r *row, refs []*row) *row {
	name := fileName(r.name)
	if src.profile {
		r.profile = name
	}
	return poolRow(dir, r, &freshPool{name: name, req: src.req, slot: src.slot, refs: refs,
		values: func(_, n int) ([]string, error) { return src.values(n, *duration) }})
}

// ratePath sets path to send, in each round of the constant-rate table,
// a value of its own with every request, made before the round's run.
func (src *freshSource) ratePath(path *loadPath) {
	var raw [][]byte
	path.prepare = func(int) error {
		values, err := src.values(int(rateFor.Seconds()*float64(*rate)), *rateFor)
		if err != nil {
			return err
		}
		raw = make([][]byte, len(values))
		for i, v := range values {
			raw[i] = []byte(src.slot.fill(src.req, v).raw())
		}
		return nil
	}
	path.request = func(_, i int) []byte { return raw[i] }
}

// makeFresh makes n values with mk, on every core, each at the time it is
// made; what names them (what) is for the errors. It fails if making them
// took so long that the oldest could be older than window, past which the
// issuer refuses it, before a run of d ends.
func makeFresh(what string, n int, d, window time.Duration, mk func(now time.Time) (string, error)) ([]string, error) {
	start := time.Now()
	values := make([]string, n)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += workers {
				values[i], errs[w] = mk(time.Now())
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	// The slack is for loading the pool into wrk and for the clocks.
	if age := time.Since(start) + d + 10*time.Second; age > window {
		return nil, fmt.Errorf("%d %s took %v to make: the oldest would be %v old at the run's end, past the issuer's %v",
			n, what, time.Since(start).Round(time.Second), age.Round(time.Second), window)
	}
	return values, nil
}
