package main

import (
	"testing"
	"time"
)

// TestFloors: the private_key_jwt floor is the secret-based issue of the
// round plus one verification; a round without that row has no such floor,
// and asking for it is an error, not a floor of zero.
func TestFloors(t *testing.T) {
	c := sigCosts{sign: 20 * time.Microsecond, verify: 50 * time.Microsecond, verifyES256: 90 * time.Microsecond}
	fl := floors(30*time.Microsecond, 120*time.Microsecond, c)
	for _, tc := range []struct {
		floor string
		want  time.Duration
	}{{floorBare, 30 * time.Microsecond}, {floorSign, 50 * time.Microsecond}, {floorVerify, 80 * time.Microsecond},
		{floorSignAndProof, 100 * time.Microsecond}, {floorIssueVerify, 170 * time.Microsecond}} {
		if got, err := floorOf(fl, "row", tc.floor); err != nil || got != tc.want {
			t.Errorf("floor %q = %v, %v, want %v", tc.floor, got, err, tc.want)
		}
	}
	if got, err := floorOf(floors(30*time.Microsecond, 0, c), "row", floorIssueVerify); err == nil {
		t.Errorf("floor %q with no secret issue row: %v, want an error", floorIssueVerify, got)
	}
}

// TestRoundFloors: each row's floor in a round comes from that round's bare
// handler (the first row) and secret-based issue row; a private_key_jwt row
// in a round without the latter fails the round.
func TestRoundFloors(t *testing.T) {
	c := sigCosts{sign: 20 * time.Microsecond, verify: 50 * time.Microsecond}
	type r struct {
		name, floor string
		cpu         time.Duration
	}
	rows := []r{{"bare", floorBare, 30 * time.Microsecond}, {jwtIssueName, floorSign, 120 * time.Microsecond},
		{assertionName, floorIssueVerify, 300 * time.Microsecond}}
	at := func(rows []r) func(int) (string, string, time.Duration) {
		return func(i int) (string, string, time.Duration) { return rows[i].name, rows[i].floor, rows[i].cpu }
	}
	got, err := roundFloors(len(rows), at(rows), c)
	want := []time.Duration{30 * time.Microsecond, 50 * time.Microsecond, 170 * time.Microsecond}
	if err != nil || len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("roundFloors = %v, %v, want %v", got, err, want)
	}
	without := []r{rows[0], rows[2]}
	if got, err := roundFloors(len(without), at(without), c); err == nil {
		t.Errorf("roundFloors without the secret issue row = %v, want an error", got)
	}
}
