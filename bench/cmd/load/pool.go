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
)

// A fresh pool feeds a wrk run with values that no other request uses:
// never-seen tokens (cold.go), DPoP proofs (dpop.go). wrk replays one
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
	// req is the request, less the pooled header; header is the header the
	// values go into, after prefix ("Bearer ").
	req            httpReq
	header, prefix string
	// refs are rows measured earlier in each round whose requests/s bound
	// this row's; own is this row, whose previous round counts too.
	refs []*row
	own  *row
	// values makes n values for round.
	values func(round, n int) ([]string, error)
	pool   int // values of the latest round
}

// poolLua hands each wrk thread (by setup) its own file of values and each
// request the thread's next one, in the header the request carries it in;
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
  local h = {{headers}}
  h[{{header}}] = {{value_prefix}} .. v
  return wrk.format({{method}}, nil, h, {{body}})
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
	body := "nil"
	if p.req.body != "" {
		body = strconv.Quote(p.req.body)
	}
	return strings.NewReplacer("{{prefix}}", strconv.Quote(prefix), "{{headers}}", h.String(), "{{value_prefix}}", strconv.Quote(p.prefix),
		"{{header}}", strconv.Quote(p.header), "{{method}}", strconv.Quote(p.req.method), "{{body}}", body).Replace(poolLua)
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
