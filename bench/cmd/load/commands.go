package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Redis commands per request: INFO commandstats before and after a run,
// the calls of every command over the run ÷ the requests the run served.
// Everything Redis ran meanwhile counts: the issuers' worker-ID lease
// renewals and revocation-log heartbeats too, amortised over the run's
// requests, and each command a script or a transaction runs, as
// commandstats counts them. The one INFO of this tool that falls inside
// the window (the first; a call counts once it has run) is taken out.

// commandsLegend says under a table what its Redis cmds/req column counts.
const commandsLegend = "Redis cmds/req: INFO commandstats calls over the run ÷ requests served; nothing is left out " +
	"(the issuers' lease renewals and revocation-log heartbeats count, amortised over the run's requests; " +
	"commands inside scripts and transactions count each, as commandstats counts them), except this tool's own INFO; " +
	"the target for hot validation is ≤ 0.01"

// commandCalls is the calls of each Redis command so far, by its
// commandstats name ("get", "client|list").
type commandCalls map[string]int64

// commandStats reads INFO commandstats of the benchmark's Redis.
func commandStats(redisPort int) (commandCalls, error) {
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(redisPort), "INFO", "commandstats").Output()
	if err != nil {
		return nil, fmt.Errorf("redis-cli INFO commandstats: %w", err)
	}
	return parseCommandStats(out)
}

// parseCommandStats parses INFO commandstats: a "# Commandstats" heading,
// then one "cmdstat_NAME:calls=N,usec=...,..." line a command. Any other
// line, or one without a calls count, is an error.
func parseCommandStats(info []byte) (commandCalls, error) {
	calls := commandCalls{}
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		name, fields, found := strings.Cut(rest, ":")
		if !ok || !found || name == "" {
			return nil, fmt.Errorf("INFO commandstats: unexpected line %q", line)
		}
		n := int64(-1)
		for _, f := range strings.Split(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				var err error
				if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
					return nil, fmt.Errorf("INFO commandstats: %s: calls %q", name, v)
				}
			}
		}
		if n < 0 {
			return nil, fmt.Errorf("INFO commandstats: %s: no calls in %q", name, line)
		}
		if _, dup := calls[name]; dup {
			return nil, fmt.Errorf("INFO commandstats: %s twice", name)
		}
		calls[name] = n
	}
	return calls, sc.Err()
}

// since is the calls of each command from before to c, less the one INFO
// of this tool that the window holds; commands not called are left out.
func (c commandCalls) since(before commandCalls) (commandCalls, error) {
	d := commandCalls{}
	for name, n := range c {
		k := n - before[name]
		if name == "info" {
			k--
		}
		if k < 0 {
			return nil, fmt.Errorf("INFO commandstats: %s went from %d to %d calls: were the stats reset?", name, before[name], n)
		}
		if k > 0 {
			d[name] = k
		}
	}
	return d, nil
}

// total is the calls of every command.
func (c commandCalls) total() int64 {
	var sum int64
	for _, n := range c {
		sum += n
	}
	return sum
}

// perRequest is c's calls per request over requests: the total, and the
// commands by calls, most first, as "get 1.000, evalsha 0.002"; those
// under 0.001 a request are left out.
func (c commandCalls) perRequest(requests int64) (total float64, top string) {
	if requests <= 0 {
		return 0, ""
	}
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(c[b], c[a]), cmp.Compare(a, b)) })
	var parts []string
	for _, name := range names {
		if x := float64(c[name]) / float64(requests); x >= 0.001 {
			parts = append(parts, fmt.Sprintf("%s %.3f", name, x))
		}
	}
	return float64(c.total()) / float64(requests), strings.Join(parts, ", ")
}

// commandsWindow samples commandstats at its start; end gives the calls
// since.
type commandsWindow struct {
	port   int
	before commandCalls
}

// startCommands opens a commandsWindow on the Redis at port.
func startCommands(port int) (*commandsWindow, error) {
	before, err := commandStats(port)
	if err != nil {
		return nil, err
	}
	return &commandsWindow{port: port, before: before}, nil
}

// end is the calls since the window opened.
func (w *commandsWindow) end() (commandCalls, error) {
	after, err := commandStats(w.port)
	if err != nil {
		return nil, err
	}
	return after.since(w.before)
}
