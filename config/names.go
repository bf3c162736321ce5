package config

import (
	"errors"
	"fmt"
	"strings"
)

// testPrefix starts the variables of the test suite, which snowtoken never reads.
const testPrefix = "SNOWTOKEN_TEST_"

// checkNames returns an error for every name that looks like a snowtoken
// variable (SNOWTOKEN_ in any case) but is not in Vars, with the nearest name
// in Vars when one is close enough to be a misspelling.
func checkNames(names []string) error {
	var errs []error
	for _, name := range names {
		upper := strings.ToUpper(name)
		if !strings.HasPrefix(upper, "SNOWTOKEN_") || strings.HasPrefix(upper, testPrefix) || known(name) {
			continue
		}
		hint := "`snowtoken -h` lists every variable"
		if near := nearest(upper); near != "" {
			hint = "did you mean " + near + "?"
		}
		errs = append(errs, fmt.Errorf("%w: unknown variable %s: %s", ErrConfig, name, hint))
	}
	return errors.Join(errs...)
}

// known reports whether Vars lists name.
func known(name string) bool {
	for _, v := range Vars {
		if v.Name == name {
			return true
		}
	}
	return false
}

// nearest returns the name in Vars with the fewest single-character edits
// from name, if they are at most a third of what follows SNOWTOKEN_ (at least
// 2), and "" otherwise.
func nearest(name string) string {
	best, bestDist := "", max(2, (len(name)-len("SNOWTOKEN_"))/3)+1
	for _, v := range Vars {
		if d := editDistance(name, v.Name); d < bestDist {
			best, bestDist = v.Name, d
		}
	}
	return best
}

// editDistance returns the Levenshtein distance between a and b, in bytes:
// the fewest insertions, deletions and substitutions that turn a into b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
