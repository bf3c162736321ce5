package snowflakealg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/bitsalloc"
)

func TestParseID(t *testing.T) {
	// The syntax is bitsalloc.ParseID's, tested there; here, its wrapping.
	if got, err := ParseID("123456789012345678"); err != nil || got != 123456789012345678 {
		t.Errorf("ParseID: got %d, %v; want 123456789012345678", got, err)
	}
	for _, in := range []string{"", "01", "-1", "9223372036854775808"} {
		if got, err := ParseID(in); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseID(%q): got %v, %v; want ErrInvalidID", in, got, err)
		}
	}
}

func TestIDJSON(t *testing.T) {
	in := struct {
		ID ID `json:"id"`
	}{ID: 1<<62 + 12345}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"id":"4611686018427400249"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	var out struct {
		ID ID `json:"id"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.ID != in.ID {
		t.Fatalf("round trip: got %d, %v", out.ID, err)
	}
	for _, bad := range []string{`{"id":4611686018427400249}`, `{"id":"x"}`, `{"id":""}`, `{"id":"-5"}`, `{"id":null}`} {
		if err := json.Unmarshal([]byte(bad), &out); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

func TestPartsRejectsNegative(t *testing.T) {
	if _, err := ID(-1).Parts(bitsalloc.Default(), DefaultEpoch); !errors.Is(err, ErrInvalidID) {
		t.Fatalf("got %v", err)
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1", "0", "9223372036854775807", "9223372036854775808", "-1", "01", "", "1a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidID) {
				t.Fatalf("ParseID(%q): error %v does not wrap ErrInvalidID", s, err)
			}
			return
		}
		if id < 0 || id.String() != s {
			t.Fatalf("ParseID(%q) = %d, which prints as %q", s, id, id.String())
		}
		b, _ := id.MarshalJSON()
		var back ID
		if err := back.UnmarshalJSON(b); err != nil || back != id {
			t.Fatalf("JSON round trip of %d: %d, %v", id, back, err)
		}
	})
}

func ExampleID_Parts() {
	id, _ := ParseID("4194332675")
	p, _ := id.Parts(bitsalloc.Default(), DefaultEpoch)
	fmt.Println(p.Time.Format(time.RFC3339Nano), p.Worker, p.Sequence)
	b, _ := json.Marshal(id)
	fmt.Println(string(b))
	// Output:
	// 2026-01-01T00:00:01Z 7 3
	// "4194332675"
}

func ExampleSnowFlakeAlg_NextID() {
	clock := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	g, _ := New(Settings{WorkerID: 42, Now: func() time.Time { return clock }})
	a, _ := g.NextID(context.Background())
	b, _ := g.NextID(context.Background())
	pa, _ := g.Decompose(a)
	pb, _ := g.Decompose(b)
	fmt.Println(pa.Time, pa.Worker, pa.Sequence)
	fmt.Println(pb.Time, pb.Worker, pb.Sequence)
	// Output:
	// 2026-06-01 12:00:00 +0000 UTC 42 0
	// 2026-06-01 12:00:00 +0000 UTC 42 1
}

// TestPartsEveryLayout decodes the smallest and largest ID of layouts up to the
// widest timestamp field, whose milliseconds outgrow time.Duration (about 292
// years) from 44 bits on.
func TestPartsEveryLayout(t *testing.T) {
	epochs := []time.Time{DefaultEpoch, time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 250_000_000, time.UTC)}
	for _, layout := range []string{"41/10/12", "43/8/12", "44/7/12", "47/4/12", "48/3/12", "61/1/1"} {
		a, err := bitsalloc.Parse(layout)
		if err != nil {
			t.Fatal(err)
		}
		for _, epoch := range epochs {
			largest := ID(math.MaxInt64) // every field at its maximum
			for _, tc := range []struct {
				id ID
				ms int64
			}{
				{0, 0},
				{ID(1) << (a.WorkerBits() + a.SequenceBits()), 1},
				{largest, a.MaxDelta()},
			} {
				// The instant, in milliseconds since 1970, without time.Duration.
				want := time.UnixMilli(epoch.UnixMilli() + tc.ms).Add(time.Duration(epoch.Nanosecond() % 1e6)).UTC()
				if got := tc.id.Time(a, epoch); !got.Equal(want) {
					t.Errorf("layout %s, epoch %v: ID(%d).Time = %v, want %v", layout, epoch, tc.id, got, want)
				}
				p, err := tc.id.Parts(a, epoch)
				if want.Year() > 9999 {
					// RFC 3339, and so the JSON of Parts, ends with year 9999.
					if !errors.Is(err, ErrInvalidID) {
						t.Errorf("layout %s, epoch %v: ID(%d).Parts: %+v, %v; want ErrInvalidID for a time in year %d", layout, epoch, tc.id, p, err, want.Year())
					}
					continue
				}
				if err != nil || !p.Time.Equal(want) || p.ID != tc.id {
					t.Errorf("layout %s, epoch %v: ID(%d).Parts = %+v, %v; want time %v", layout, epoch, tc.id, p, err, want)
					continue
				}
				if _, err := json.Marshal(p); err != nil {
					t.Errorf("layout %s, epoch %v: JSON of %+v: %v", layout, epoch, p, err)
				}
			}
		}
	}
}
