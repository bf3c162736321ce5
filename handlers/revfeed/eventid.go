package revfeed

import (
	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/refusal"
	"github.com/snowtoken/snowtoken/token"
)

// CheckID parses id as an event ID (revocation.ParseEventID: an epoch of
// hex digits and dots, a "-", and a stream ID, ms-seq), refusing one that
// does not parse as an invalid request. Which epoch, and whether it can be
// resumed from, is the Source's to say.
func CheckID(id string) (revocation.EventID, error) {
	e, err := revocation.ParseEventID(id)
	if err != nil {
		return e, refusal.New(token.ErrInvalidRequest, "an event ID is <epoch>-<ms>-<seq>")
	}
	return e, nil
}

// sameEpoch reports whether two event IDs are of one epoch (false when
// either does not parse).
func sameEpoch(a, b string) bool {
	ea, err1 := revocation.ParseEventID(a)
	eb, err2 := revocation.ParseEventID(b)
	return err1 == nil && err2 == nil && ea.SameEpoch(eb)
}
