package token

import (
	"errors"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/internal/refusal"
)

// TestSessionLive is the Redis side's revoked-or-not rule as a table:
// what a store holds on a token, and the verdict.
func TestSessionLive(t *testing.T) {
	const issued = 1_000
	for _, tc := range []struct {
		name       string
		s          Session
		wantErr    error // nil: live
		wantMarker bool  // ErrMarkerLost too
		wantDesc   string
	}{
		{name: "live", s: Session{Marker: "m1", SubjectMarker: "m1"}},
		{name: "live, a client cutoff before the token", s: Session{Marker: "m1", SubjectMarker: "m1", ClientCutoff: issued - 1}},
		{name: "the client revoked at the token's time", s: Session{Marker: "m1", SubjectMarker: "m1", ClientCutoff: issued},
			wantErr: ErrRevoked, wantDesc: "all tokens of the client were revoked"},
		{name: "the client revoked after", s: Session{Marker: "m1", SubjectMarker: "m1", ClientCutoff: issued + 1},
			wantErr: ErrRevoked, wantDesc: "all tokens of the client were revoked"},
		{name: "a cutoff that does not read: fail closed", s: Session{Marker: "m1", SubjectMarker: "m1", ClientCutoff: CutoffUnreadable},
			wantErr: ErrRevoked, wantDesc: "all tokens of the client were revoked"},
		{name: "the client's cutoff first", s: Session{ClientCutoff: issued},
			wantErr: ErrRevoked, wantDesc: "all tokens of the client were revoked"},
		{name: "no record", s: Session{SubjectMarker: "m1"}, wantErr: ErrRevoked, wantDesc: "no session"},
		{name: "no record, no marker", s: Session{}, wantErr: ErrRevoked, wantDesc: "no session"},
		{name: "the marker lost", s: Session{Marker: "m1"}, wantErr: ErrRevoked, wantMarker: true, wantDesc: "no session"},
		{name: "the subject revoked", s: Session{Marker: "m1", SubjectMarker: "m2"},
			wantErr: ErrRevoked, wantDesc: "all tokens of the subject were revoked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SessionLive(issued, tc.s)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("SessionLive = %v, want live", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || errors.Is(err, ErrMarkerLost) != tc.wantMarker {
				t.Fatalf("SessionLive = %v, want %v (ErrMarkerLost: %v)", err, tc.wantErr, tc.wantMarker)
			}
			if got, _ := refusal.Description(err); got != tc.wantDesc {
				t.Errorf("description %q, want %q", got, tc.wantDesc)
			}
		})
	}
}

// TestSessionCreated: a new session is refused when it was not written, or
// when its client's cutoff covers it (a cutoff that does not read as
// unavailable, one that does with the wait until a token would be past it).
func TestSessionCreated(t *testing.T) {
	const issued = 1_000
	if err := SessionCreated(true, issued, 0); err != nil {
		t.Errorf("written, no cutoff: %v", err)
	}
	if err := SessionCreated(true, issued, issued-1); err != nil {
		t.Errorf("written, a cutoff before: %v", err)
	}
	if err := SessionCreated(false, issued, 0); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrDuplicateID) {
		t.Errorf("not written: %v, want ErrUnavailable and ErrDuplicateID", err)
	}
	err := SessionCreated(true, issued, issued+41)
	var ra interface{ RetryAfter() time.Duration }
	if !errors.Is(err, ErrClientRevoking) || !errors.As(err, &ra) || ra.RetryAfter() != 42*time.Millisecond {
		t.Errorf("a cutoff after: %v, want ErrClientRevoking retrying after 42ms", err)
	}
	if err := SessionCreated(true, issued, CutoffUnreadable); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrClientRevoking) {
		t.Errorf("a cutoff that does not read: %v, want ErrUnavailable alone", err)
	}
}
