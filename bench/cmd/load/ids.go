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
	fmt.Printf("%-24s %10s %15s %12s\n", "case", "of limit", "lowest-highest", "of own limit")
	for _, c := range cases {
		lo, hi := slices.Min(c.ofLimit), slices.Max(c.ofLimit)
		fmt.Printf("%-24s %10.4f %15s %12.4f\n", c.name, median(slices.Clone(c.ofLimit)),
			fmt.Sprintf("%.4f-%.4f", lo, hi), median(slices.Clone(c.ofOwnLimit)))
	}
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
		var ofLimit, ofOwn float64
		var found int
		for i := 3; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i-1], 64)
			if err != nil {
				return nil, fmt.Errorf("ID benchmark line %q: %w", sc.Text(), err)
			}
			switch f[i] {
			case "frac_of_limit":
				ofLimit, found = v, found+1
			case "frac_of_own_limit":
				ofOwn, found = v, found+1
			}
		}
		if found != 2 {
			return nil, fmt.Errorf("ID benchmark line %q: no frac_of_limit and frac_of_own_limit", sc.Text())
		}
		i := slices.IndexFunc(cases, func(c *idCase) bool { return c.name == name })
		if i < 0 {
			cases = append(cases, &idCase{name: name})
			i = len(cases) - 1
		}
		cases[i].ofLimit = append(cases[i].ofLimit, ofLimit)
		cases[i].ofOwnLimit = append(cases[i].ofOwnLimit, ofOwn)
		seen++
	}
	if seen == 0 {
		return nil, fmt.Errorf("ID benchmark: no BenchmarkIDs results in its output")
	}
	return cases, nil
}

// loadAverage is the 1-minute load average, or "?" where /proc has none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
