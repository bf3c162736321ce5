package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/token"
)

// opaqueKey is the key of the record of the opaque token jti. It has no
// hash tag: on a Cluster it lands wherever its ID hashes, away from its
// subject's marker.
func (s *Store) opaqueKey(jti string) string { return s.prefix + "o:" + jti }

// markerOnlyScript is markerLua alone, on KEYS[1]: on a Cluster, the first of
// the two steps of CreateOpaque. It returns the marker.
var markerOnlyScript = redis.NewScript(markerOnlyLua)

const markerOnlyLua = markerLua + "return gen\n"

// CreateOpaque writes rec, the record of a new opaque token jti whose ID's
// time is issued, for ttl: its head, the subject's current marker, its
// tail (recordParts), under opaqueKey(jti), and makes sure the marker
// outlives it, as Create does. On a single Redis or Sentinel it is one
// script, Create's; on a Cluster, where the record and the marker are in
// different slots, the marker's script and then a SET NX: two round trips.
// A revocation of the subject between the two leaves the new record with
// the old marker, so the token is born revoked: closed, never open. A
// record that exists already is token.ErrDuplicateID, and a token its
// client's revocation covers token.ErrClientRevoking, as in Create; on a
// Cluster the client's revocation time is read with the SET NX.
//
// The marker is given markerMargin more than the record, whose PX on a
// Cluster counts from the SET NX, a round trip after the marker's script.
func (s *Store) CreateOpaque(ctx context.Context, jti string, issued time.Time, ttl time.Duration, rec token.OpaqueRecord) error {
	k := s.keys(rec.Subject, rec.Client, "")
	k.record = s.opaqueKey(jti)
	head, tail := recordParts(&rec)
	if !s.cluster {
		return s.create(ctx, k, issued, ttl, head, tail)
	}
	cmd, err := s.eval(ctx, nil, markerOnlyScript, markerOnlyLua, []string{k.gen}, markerTTL(ttl), newMarker())
	if err != nil {
		return unavailable(err)
	}
	gen, err := cmd.Text()
	if err != nil {
		return unavailable(err)
	}
	set := redis.NewBoolCmd(ctx, "set", k.record, head+gen+tail, "nx", "px", ttl.Milliseconds())
	client := redis.NewStringCmd(ctx, "get", k.client)
	if err := s.do(ctx, set, client); err != nil && !errors.Is(err, redis.Nil) {
		return unavailable(err)
	}
	cut, err := optional(client)
	if err != nil {
		return err
	}
	return token.SessionCreated(set.Val(), issued.UnixMilli(), cutoff(cut)) // SET NX answers nil, which BoolCmd reads as false
}

// validateOpaqueLua reads the record KEYS[1], then the marker and the
// revocation time of the subject and client it names, the key names made
// with the prefix ARGV[1] as keys makes them: {record, marker, client
// time}, a missing key as nil; nil when there is no record, {record} when
// it does not read. These two keys are not declared, which a single Redis
// allows and a Cluster does not (they may be in other slots): there
// ReadOpaque takes two round trips instead (readOpaqueCluster).
const validateOpaqueLua = `
local rec = redis.call('GET', KEYS[1])
if not rec then
  return false
end
local sub, client = string.match(rec, '^[^\n]*\n([^\n]*)\n([^\n]*)\n', 34)
local v = string.byte(rec, 1)
if not sub or v < 49 or v > 51 then -- the record versions '1', '2' and '3' (token's opaque.go)
  return {rec}
end
return {rec, redis.call('GET', ARGV[1] .. '{' .. sub .. '}:gen'), redis.call('GET', ARGV[1] .. 'client:{' .. client .. '}')}
`

var validateOpaqueScript = redis.NewScript(validateOpaqueLua)

// ReadOpaque returns what decides whether the opaque token jti is live:
// its record and, as a token.Session, the marker the record holds ("" when
// there is none: a zero record), its subject's marker and its client's
// revocation time; token.ErrUnreadableRecord when the record does not read
// (decodeRecord), token.ErrUnavailable when Redis does not answer. On a
// single Redis or Sentinel it is one script (validateOpaqueLua); on a
// Cluster a GET of the record and then, in one pipeline, GETs of the two
// others.
func (s *Store) ReadOpaque(ctx context.Context, jti string) (token.OpaqueRecord, token.Session, error) {
	var none token.OpaqueRecord
	if s.cluster {
		return s.readOpaqueCluster(ctx, jti)
	}
	cmd, err := s.eval(ctx, nil, validateOpaqueScript, validateOpaqueLua, []string{s.opaqueKey(jti)}, s.prefix)
	switch {
	case errors.Is(err, redis.Nil):
		return none, token.Session{}, nil
	case err != nil:
		return none, token.Session{}, err
	}
	vals, err := cmd.Slice()
	if err != nil || len(vals) == 0 {
		return none, token.Session{}, unavailable(fmt.Errorf("validate script: %v", vals))
	}
	rec, marker, err := decodeRecord(text(vals[0]))
	if err != nil || len(vals) < 3 { // the script could not read the names
		return none, token.Session{}, token.ErrUnreadableRecord
	}
	return rec, token.Session{Marker: marker, SubjectMarker: text(vals[1]), ClientCutoff: cutoff(vals[2])}, nil
}

// readOpaqueCluster is ReadOpaque on a Cluster: two round trips.
func (s *Store) readOpaqueCluster(ctx context.Context, jti string) (token.OpaqueRecord, token.Session, error) {
	var none token.OpaqueRecord
	rec, marker, err := s.getOpaque(ctx, jti)
	if err != nil || marker == "" {
		return none, token.Session{}, err
	}
	k := s.keys(rec.Subject, rec.Client, "")
	cmds := [2]*redis.StringCmd{redis.NewStringCmd(ctx, "get", k.gen), redis.NewStringCmd(ctx, "get", k.client)}
	// do returns the first command's error; a second's is in its command.
	if err := s.do(ctx, cmds[0], cmds[1]); err != nil && !errors.Is(err, redis.Nil) {
		return none, token.Session{}, unavailable(err)
	}
	var vals [2]any
	for i, cmd := range cmds {
		if vals[i], err = optional(cmd); err != nil {
			return none, token.Session{}, err
		}
	}
	return rec, token.Session{Marker: marker, SubjectMarker: text(vals[0]), ClientCutoff: cutoff(vals[1])}, nil
}

// GetOpaque returns the record of the opaque token jti, and ok false when
// there is none; token.ErrUnreadableRecord when it does not read.
func (s *Store) GetOpaque(ctx context.Context, jti string) (rec token.OpaqueRecord, ok bool, err error) {
	rec, marker, err := s.getOpaque(ctx, jti)
	return rec, marker != "", err
}

// getOpaque returns the record of the opaque token jti and the marker it
// holds ("" when there is no record).
func (s *Store) getOpaque(ctx context.Context, jti string) (token.OpaqueRecord, string, error) {
	get := redis.NewStringCmd(ctx, "get", s.opaqueKey(jti))
	if err := s.do(ctx, get); errors.Is(err, redis.Nil) {
		return token.OpaqueRecord{}, "", nil
	} else if err != nil {
		return token.OpaqueRecord{}, "", unavailable(err)
	}
	return decodeRecord(get.Val())
}
