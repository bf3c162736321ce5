// Package bitsalloc packs the three fields of a Snowflake ID into one int64.
//
// The default layout (41/10/12) is:
//
//	 63  62                                       22 21            12 11            0
//	+---+-------------------------------------------+----------------+---------------+
//	| 0 |   timestamp: ms since the epoch (41 bits)  | worker (10 bits)| sequence (12) |
//	+---+-------------------------------------------+----------------+---------------+
//	sign   shift = workerBits + sequenceBits          shift = sequenceBits
//
// The widths are configurable, but they must sum to 63 so that the sign bit is
// always 0 and every ID is a positive int64. A field that does not fit its width is
// an error: it is never masked into its neighbour, which is how two different
// (time, worker, sequence) triples could otherwise produce the same ID.
package bitsalloc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Default widths of the fields, as in Twitter's original Snowflake.
const (
	DefaultTimestampBits = 41
	DefaultWorkerBits    = 10
	DefaultSequenceBits  = 12
)

// TotalBits is the number of bits the three fields share: 64 less the sign bit.
const TotalBits = 63

// Errors returned by New, Parse, Allocate, Decompose and ParseID.
var (
	ErrWidth         = errors.New("bitsalloc: every field needs at least 1 bit")
	ErrLayout        = errors.New("bitsalloc: field widths must sum to 63")
	ErrSyntax        = errors.New("bitsalloc: layout must look like 41/10/12")
	ErrDeltaRange    = errors.New("bitsalloc: timestamp out of range")
	ErrWorkerRange   = errors.New("bitsalloc: worker out of range")
	ErrSequenceRange = errors.New("bitsalloc: sequence out of range")
	ErrNegativeID    = errors.New("bitsalloc: id is negative")
	ErrIDSyntax      = errors.New("bitsalloc: id must be a decimal int64 such as 1234")
)

// BitsAllocator joins and splits the fields of an ID for one layout. It is
// immutable, so one value may be shared by any number of goroutines.
type BitsAllocator struct {
	timestampBits, workerBits, sequenceBits int

	maxDelta, maxWorker, maxSequence int64
	timestampShift, workerShift      int
}

// New returns the allocator for the given widths. It rejects a width below 1 and
// widths that do not sum to 63.
func New(timestampBits, workerBits, sequenceBits int) (*BitsAllocator, error) {
	if timestampBits < 1 || workerBits < 1 || sequenceBits < 1 {
		return nil, fmt.Errorf("%w: got %d/%d/%d", ErrWidth, timestampBits, workerBits, sequenceBits)
	}
	if timestampBits+workerBits+sequenceBits != TotalBits {
		return nil, fmt.Errorf("%w: %d/%d/%d sums to %d", ErrLayout,
			timestampBits, workerBits, sequenceBits, timestampBits+workerBits+sequenceBits)
	}
	return &BitsAllocator{
		timestampBits:  timestampBits,
		workerBits:     workerBits,
		sequenceBits:   sequenceBits,
		maxDelta:       -1 ^ (-1 << timestampBits),
		maxWorker:      -1 ^ (-1 << workerBits),
		maxSequence:    -1 ^ (-1 << sequenceBits),
		timestampShift: workerBits + sequenceBits,
		workerShift:    sequenceBits,
	}, nil
}

// Default returns the 41/10/12 allocator.
func Default() *BitsAllocator {
	a, err := New(DefaultTimestampBits, DefaultWorkerBits, DefaultSequenceBits)
	if err != nil {
		panic(err) // unreachable: the defaults are a valid layout
	}
	return a
}

// Parse reads a layout written as "timestamp/worker/sequence", such as "41/10/12".
func Parse(s string) (*BitsAllocator, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	var w [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %q", ErrSyntax, s)
		}
		w[i] = n
	}
	return New(w[0], w[1], w[2])
}

// String returns the layout as Parse reads it, such as "41/10/12".
func (a *BitsAllocator) String() string {
	return fmt.Sprintf("%d/%d/%d", a.timestampBits, a.workerBits, a.sequenceBits)
}

// TimestampBits returns the width of the timestamp field.
func (a *BitsAllocator) TimestampBits() int { return a.timestampBits }

// WorkerBits returns the width of the worker field.
func (a *BitsAllocator) WorkerBits() int { return a.workerBits }

// SequenceBits returns the width of the sequence field.
func (a *BitsAllocator) SequenceBits() int { return a.sequenceBits }

// MaxDelta returns the largest timestamp (milliseconds since the epoch) that fits.
func (a *BitsAllocator) MaxDelta() int64 { return a.maxDelta }

// MaxWorker returns the largest worker ID that fits.
func (a *BitsAllocator) MaxWorker() int64 { return a.maxWorker }

// MaxSequence returns the largest sequence number that fits.
func (a *BitsAllocator) MaxSequence() int64 { return a.maxSequence }

// Allocate joins the three fields into an ID with shifts and OR. A field outside
// [0, max] is an error. It does not allocate unless it fails.
func (a *BitsAllocator) Allocate(delta, worker, sequence int64) (int64, error) {
	if err := inRange(ErrDeltaRange, delta, a.maxDelta); err != nil {
		return 0, err
	}
	if err := inRange(ErrWorkerRange, worker, a.maxWorker); err != nil {
		return 0, err
	}
	if err := inRange(ErrSequenceRange, sequence, a.maxSequence); err != nil {
		return 0, err
	}
	return delta<<a.timestampShift | worker<<a.workerShift | sequence, nil
}

// Decompose splits an ID into its fields. It is the inverse of Allocate.
func (a *BitsAllocator) Decompose(id int64) (delta, worker, sequence int64, err error) {
	if id < 0 {
		return 0, 0, 0, fmt.Errorf("%w: %d", ErrNegativeID, id)
	}
	return id >> a.timestampShift, id >> a.workerShift & a.maxWorker, id & a.maxSequence, nil
}

// maxIDLen is the length of the largest int64 in decimal.
const maxIDLen = 19

// ParseID reads an ID written in decimal, as strconv.FormatInt writes it:
// digits only, no sign, no leading zeros, no spaces, and at most the largest
// int64. Both the issuer and package client read IDs with it.
func ParseID(s string) (int64, error) {
	if s == "" || len(s) > maxIDLen || (s[0] == '0' && len(s) > 1) {
		return 0, fmt.Errorf("%w: got %.32q", ErrIDSyntax, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: got %.32q", ErrIDSyntax, s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: got %.32q", ErrIDSyntax, s)
	}
	return n, nil
}

// CheckWorker reports whether worker fits the worker field.
func (a *BitsAllocator) CheckWorker(worker int64) error {
	return inRange(ErrWorkerRange, worker, a.maxWorker)
}

// inRange reports, wrapping sentinel, whether v is in [0, max].
func inRange(sentinel error, v, max int64) error {
	if uint64(v) > uint64(max) {
		return fmt.Errorf("%w: %d not in [0, %d]", sentinel, v, max)
	}
	return nil
}
