package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

var memSessions = flag.Int("mem-sessions", 5000, "sessions of each format (JWT, opaque, the peer's) whose Redis memory the run measures, one format after another (0 skips)")

// sessionSource is a kind of session whose Redis memory sessionMemory
// measures: POST /token at url with basic, which stores its sessions in db.
type sessionSource struct {
	name, url, basic string
	db               int
	note             string // printed under the table, if not empty
}

// memSample is what Redis holds at one moment: used_memory (the whole
// server's), and the keys and hash tables (MEMORY STATS
// overhead.hashtable.main and .expires: their entries and bucket arrays)
// of one db.
type memSample struct{ used, keys, tables int64 }

// sessionMemory issues *memSessions sessions of each source, one source
// after another (used_memory is the server's, so nothing else may add to
// it meanwhile), and prints the Redis memory each session adds. A db's hash
// tables double their bucket arrays at powers of two of its keys, so a few
// thousand sessions may or may not pay for a doubling; the table shows the
// tables' share apart, and a figure that charges the sessions' keys the
// tables' bytes per key after the sessions instead.
func sessionMemory(redisPort int, sources []sessionSource) error {
	n := int64(*memSessions)
	if n <= 0 {
		return nil
	}
	fmt.Printf("Redis memory per session, %d sessions of each issued through POST /token, one kind after another (INFO used_memory, MEMORY STATS, DBSIZE of its db):\n\n", n)
	fmt.Println("| sessions of | db | keys per session | used_memory added per session | of which the db's hash tables | bytes per session, hash tables amortized |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, src := range sources {
		before, err := sampleMemory(redisPort, src.db)
		if err != nil {
			return err
		}
		if err := issueN(src.url, src.basic, n, nil); err != nil {
			return fmt.Errorf("%s: %w", src.name, err)
		}
		after, err := sampleMemory(redisPort, src.db)
		if err != nil {
			return err
		}
		per := func(x int64) float64 { return float64(x) / float64(n) }
		keys, used, tables := after.keys-before.keys, after.used-before.used, after.tables-before.tables
		// The tables' bytes per key as they stand after the sessions, for
		// the keys the sessions added, instead of what the tables grew.
		amortized := per(used-tables) + float64(after.tables)/float64(max(after.keys, 1))*per(keys)
		fmt.Printf("| %s | %d | %.2f | %.0f B | %.0f B | %.0f B |\n", src.name, src.db, per(keys), per(used), per(tables), amortized)
	}
	for _, src := range sources {
		if src.note != "" {
			fmt.Printf("\n%s: %s\n", src.name, src.note)
		}
	}
	fmt.Println()
	return nil
}

// sampleMemory reads used_memory and db's keys and hash tables.
func sampleMemory(redisPort, db int) (memSample, error) {
	var s memSample
	var err error
	if s.used, err = usedMemory(redisPort); err != nil {
		return s, err
	}
	if s.keys, err = dbsize(redisPort, db); err != nil {
		return s, err
	}
	out, err := exec.Command("redis-cli", "-p", strconv.Itoa(redisPort), "MEMORY", "STATS").Output()
	if err != nil {
		return s, fmt.Errorf("redis-cli MEMORY STATS: %w", err)
	}
	s.tables, err = hashTables(out, db)
	return s, err
}

// hashTables sums overhead.hashtable.main and .expires of db in MEMORY
// STATS as redis-cli prints it to a pipe: one name or value a line, db.N's
// fields after its name. A db without keys is not in it: 0.
func hashTables(stats []byte, db int) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(stats))
	var lines []string
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	var sum int64
	for i, l := range lines {
		if l != "db."+strconv.Itoa(db) {
			continue
		}
		for j := i + 1; j+1 < len(lines) && strings.HasPrefix(lines[j], "overhead."); j += 2 {
			if lines[j] == "overhead.hashtable.main" || lines[j] == "overhead.hashtable.expires" {
				v, err := strconv.ParseInt(lines[j+1], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("MEMORY STATS %s: %w", lines[j], err)
				}
				sum += v
			}
		}
	}
	return sum, nil
}
