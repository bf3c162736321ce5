package snowflakealg

import (
	"fmt"
	"strconv"
	"time"

	"github.com/snowtoken/snowtoken/bitsalloc"
	"github.com/snowtoken/snowtoken/internal/refusal"
)

// ID is a Snowflake ID. In JSON it is a quoted decimal string, because
// JavaScript numbers lose precision above 2^53.
type ID int64

// maxIDLen is the length of the largest int64 in decimal.
const maxIDLen = 19

// ParseID reads an ID written in decimal, as String writes it: digits only, no
// sign, no leading zeros, no spaces, and a positive int64 (bitsalloc.ParseID).
func ParseID(s string) (ID, error) {
	n, err := bitsalloc.ParseID(s)
	if err != nil {
		return 0, refusal.New(ErrInvalidID, "%.32q", s)
	}
	return ID(n), nil
}

// String returns the ID in decimal.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Int64 returns the ID as a number.
func (id ID) Int64() int64 { return int64(id) }

// MarshalJSON writes the ID as a quoted decimal string.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, maxIDLen+2)
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON reads a quoted decimal string, as MarshalJSON writes it.
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return refusal.New(ErrInvalidID, "want a quoted decimal string, got %.32q", b)
	}
	v, err := ParseID(string(b[1 : len(b)-1]))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Time returns when the ID was issued, to the millisecond, given its layout and epoch.
func (id ID) Time(a *bitsalloc.BitsAllocator, epoch time.Time) time.Time {
	delta, _, _, _ := a.Decompose(int64(id))
	return addMillis(epoch, delta)
}

// Worker returns the worker that issued the ID, given its layout.
func (id ID) Worker(a *bitsalloc.BitsAllocator) int64 {
	_, w, _, _ := a.Decompose(int64(id))
	return w
}

// Sequence returns the ID's sequence number within its millisecond, given its layout.
func (id ID) Sequence(a *bitsalloc.BitsAllocator) int64 {
	_, _, s, _ := a.Decompose(int64(id))
	return s
}

// Parts are the fields of an ID.
type Parts struct {
	ID       ID        `json:"id"`
	Time     time.Time `json:"time"`
	Worker   int64     `json:"worker_id"`
	Sequence int64     `json:"sequence"`
}

// maxPartsYear is the last year RFC 3339, and so the JSON of a time.Time, can write.
const maxPartsYear = 9999

// Parts splits the ID given its layout and epoch. A negative ID is an error,
// and so is an ID whose time is after the year 9999, which RFC 3339 cannot
// write: no generator issues one before then, and with a timestamp field of 48
// bits or more (8,900 years) such IDs exist.
func (id ID) Parts(a *bitsalloc.BitsAllocator, epoch time.Time) (Parts, error) {
	delta, w, s, err := a.Decompose(int64(id))
	if err != nil {
		return Parts{}, fmt.Errorf("%w: %w", ErrInvalidID, err)
	}
	t := addMillis(epoch, delta).UTC()
	if t.Year() > maxPartsYear {
		return Parts{}, refusal.New(ErrInvalidID, "%d is from the year %d of layout %s, after %d", id, t.Year(), a, maxPartsYear)
	}
	return Parts{ID: id, Time: t, Worker: w, Sequence: s}, nil
}
