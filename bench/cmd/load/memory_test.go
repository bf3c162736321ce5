package main

import "testing"

// memoryStats is MEMORY STATS of Redis 7.0 as redis-cli prints it to a pipe.
const memoryStats = `peak.allocated
964200
db.0
overhead.hashtable.main
72
overhead.hashtable.expires
16
overhead.hashtable.slot-to-keys
0
db.1
overhead.hashtable.main
1024
overhead.hashtable.expires
512
overhead.hashtable.slot-to-keys
0
overhead.total
876584
keys.count
2
`

func TestHashTables(t *testing.T) {
	for db, want := range map[int]int64{0: 88, 1: 1536, 2: 0} {
		got, err := hashTables([]byte(memoryStats), db)
		if err != nil || got != want {
			t.Errorf("hashTables(db %d) = %d, %v, want %d", db, got, err, want)
		}
	}
	if _, err := hashTables([]byte("db.0\noverhead.hashtable.main\nlots\n"), 0); err == nil {
		t.Error("hashTables took a value that is not a number")
	}
}
