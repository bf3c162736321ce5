package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The ID-engine comparison: BenchmarkIDs (ids_test.go in this module),
// snowflakealg beside bwmarrin/snowflake and sony/sonyflake, each shared by 1,
// 8 and 16 goroutines. Every round runs every case once, the generators in
// turn at each goroutine count, so that on a shared machine the figures
// compared are taken next to each other; the table shows each case's median
// round as a fraction of the limit, and the load average around the rounds.

var (
	idsOnly     = flag.Bool("ids-only", false, "run only the ID-engine comparison, then stop")
	idsRounds   = flag.Int("ids-rounds", 3, "rounds of the ID-engine comparison: each runs every case once")
	idsBenchFor = flag.String("ids-benchtime", "2s", "go test -benchtime of each case of the ID-engine comparison")
)

// idCase is one case of BenchmarkIDs over the rounds.
type idCase struct {
	name       string    // "snowtoken/16goroutines"
	ofLimit    []float64 // frac_of_limit, a round each
	ofOwnLimit []float64 // frac_of_own_limit, a round each
	msEmpty    []float64 // ms_empty, a round each, where reported
	msShort    []float64 // ms_short, likewise
}

// runIDs builds the benchmark into dir, runs its rounds and prints the table.
func runIDs(dir string) error {
	if *idsRounds < 1 {
		return fmt.Errorf("-ids-rounds %d: want at least 1", *idsRounds)
	}
	bin := filepath.Join(dir, "ids.test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, ".")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test -c: %w", err)
	}
	fmt.Printf("ID engine (go test -run '^$' -bench BenchmarkIDs -benchtime %s), %d rounds:\n", *idsBenchFor, *idsRounds)
	before := loadAverage()
	var cases []*idCase
	for range *idsRounds {
		var out bytes.Buffer
		cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", "BenchmarkIDs", "-test.benchtime", *idsBenchFor)
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		err := cmd.Run()
		os.Stdout.Write(out.Bytes())
		if err != nil {
			return fmt.Errorf("ID benchmark: %w", err)
		}
		if cases, err = addIDRound(cases, out.Bytes()); err != nil {
			return err
		}
	}
	fmt.Printf("\nID engine, median round of %d, as fractions of 4,096,000 IDs/s; load average %s before, %s after:\n",
		*idsRounds, before, loadAverage())
	fmt.Printf("%-24s %10s %15s %12s %9s %9s\n", "case", "of limit", "lowest-highest", "of own limit", "ms empty", "ms short")
	for _, c := range cases {
		lo, hi := slices.Min(c.ofLimit), slices.Max(c.ofLimit)
		fmt.Printf("%-24s %10.4f %15s %12.4f %9s %9s\n", c.name, median(slices.Clone(c.ofLimit)),
			fmt.Sprintf("%.4f-%.4f", lo, hi), median(slices.Clone(c.ofOwnLimit)), percent(c.msEmpty), percent(c.msShort))
	}
	fmt.Println("(ms empty, ms short: medians over the rounds of the fractions of milliseconds with no ID, and with fewer IDs than the layout allows)")
	fmt.Println()
	return nil
}

// addIDRound adds one round's `go test -bench BenchmarkIDs` output to cases,
// in the order the cases ran. Every case must report both fractions.
func addIDRound(cases []*idCase, out []byte) ([]*idCase, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	seen := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "BenchmarkIDs/") {
			continue
		}
		name := strings.TrimPrefix(f[0], "BenchmarkIDs/")
		if i := strings.LastIndexByte(name, '-'); i > 0 { // the -GOMAXPROCS suffix
			name = name[:i]
		}
		metrics := map[string]float64{}
		for i := 3; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i-1], 64)
			if err != nil {
				return nil, fmt.Errorf("ID benchmark line %q: %w", sc.Text(), err)
			}
			metrics[f[i]] = v
		}
		ofLimit, ok1 := metrics["frac_of_limit"]
		ofOwn, ok2 := metrics["frac_of_own_limit"]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("ID benchmark line %q: no frac_of_limit and frac_of_own_limit", sc.Text())
		}
		i := slices.IndexFunc(cases, func(c *idCase) bool { return c.name == name })
		if i < 0 {
			cases = append(cases, &idCase{name: name})
			i = len(cases) - 1
		}
		c := cases[i]
		c.ofLimit = append(c.ofLimit, ofLimit)
		c.ofOwnLimit = append(c.ofOwnLimit, ofOwn)
		if v, ok := metrics["ms_empty"]; ok {
			c.msEmpty = append(c.msEmpty, v)
		}
		if v, ok := metrics["ms_short"]; ok {
			c.msShort = append(c.msShort, v)
		}
		seen++
	}
	if seen == 0 {
		return nil, fmt.Errorf("ID benchmark: no BenchmarkIDs results in its output")
	}
	return cases, nil
}

// percent is the median of fractions as a percentage, or "-" for none.
func percent(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*median(slices.Clone(xs)))
}

// loadAverage is the 1-minute load average, or "?" where /proc has none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
