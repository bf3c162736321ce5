package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/token"
)

// opaqueKey is the key of an opaque token's record. It has no hash tag: on
// a Cluster it lands wherever its ID hashes, away from its subject's marker.
func (s *Store) OpaqueKey(jti string) string { return s.prefix + "o:" + jti }

// markerOnlyScript is markerLua alone, on KEYS[1]: on a Cluster, the first of
// the two steps of CreateOpaque. It returns the marker.
var markerOnlyScript = redis.NewScript(markerOnlyLua)

const markerOnlyLua = markerLua + "return gen\n"

// CreateOpaque writes the record of a new opaque token for ttl: head, the
// subject's current marker, tail (opaqueRecordParts), under k.Session, and
// makes sure the marker (k.Gen) outlives it, as Create does. On a single
// Redis or Sentinel it is one script, Create's; on a Cluster, where the
// record and the marker are in different slots, the marker's script and then
// a SET NX: two round trips. A revocation of the subject between the two
// leaves the new record with the old marker, so the token is born revoked:
// closed, never open. A record that exists already is token.ErrDuplicateID, and a
// token its client's revocation covers token.ErrClientRevoking, as in Create; on
// a Cluster the client's revocation time is read with the SET NX.
//
// The marker is given markerMargin more than the record, whose PX on a
// Cluster counts from the SET NX, a round trip after the marker's script.
func (s *Store) CreateOpaque(ctx context.Context, k token.SessionKeys, ttl time.Duration, head, tail string) error {
	if !s.cluster {
		return s.create(ctx, k, ttl, head, tail)
	}
	cmd, err := s.eval(ctx, nil, markerOnlyScript, markerOnlyLua, []string{k.Gen}, markerTTL(ttl), newMarker())
	if err != nil {
		return unavailable(err)
	}
	gen, err := cmd.Text()
	if err != nil {
		return unavailable(err)
	}
	set := redis.NewBoolCmd(ctx, "set", k.Session, head+gen+tail, "nx", "px", ttl.Milliseconds())
	client := redis.NewStringCmd(ctx, "get", k.Client)
	if err := s.do(ctx, set, client); err != nil && !errors.Is(err, redis.Nil) {
		return unavailable(err)
	}
	cut, err := optional(client)
	if err != nil {
		return err
	}
	return token.SessionCreated(set.Val(), k.Issued, cutoff(cut)) // SET NX answers nil, which BoolCmd reads as false
}

// validateOpaqueLua reads the record KEYS[1], then the marker and the
// revocation time of the subject and client it names, the key names made
// with the prefix ARGV[1] as keysFor makes them: {record, marker, client
// time}, a missing key as nil; nil when there is no record, {record} when
// it does not read. These two keys are not declared, which a single Redis
// allows and a Cluster does not (they may be in other slots): there
// ReadOpaque takes two round trips instead.
const validateOpaqueLua = `
local rec = redis.call('GET', KEYS[1])
if not rec then
  return false
end
local sub, client = string.match(rec, '^[^\n]*\n([^\n]*)\n([^\n]*)\n', 34)
if not sub or (string.byte(rec, 1) ~= 49 and string.byte(rec, 1) ~= 50) then
  return {rec}
end
return {rec, redis.call('GET', ARGV[1] .. '{' .. sub .. '}:gen'), redis.call('GET', ARGV[1] .. 'client:{' .. client .. '}')}
`

var validateOpaqueScript = redis.NewScript(validateOpaqueLua)

// ReadOpaque returns what decides whether the opaque token whose record is
// key is live: its record ("" when missing) and, as a token.Session, its
// subject's marker and its client's revocation time (zero when the record
// is missing or does not read); token.ErrUnavailable when Redis does not
// answer. On a single Redis or Sentinel it is one script
// (validateOpaqueLua); on a Cluster a GET of the record and then, in one
// pipeline, GETs of the two others.
func (s *Store) ReadOpaque(ctx context.Context, key string) (string, token.Session, error) {
	if !s.cluster {
		cmd, err := s.eval(ctx, nil, validateOpaqueScript, validateOpaqueLua, []string{key}, s.prefix)
		if errors.Is(err, redis.Nil) {
			return "", token.Session{}, nil
		}
		if err != nil {
			return "", token.Session{}, err
		}
		vals, err := cmd.Slice()
		switch {
		case err != nil || len(vals) == 0:
			return "", token.Session{}, unavailable(fmt.Errorf("validate script: %v", vals))
		case len(vals) < 3: // the record does not read
			return text(vals[0]), token.Session{}, nil
		}
		return text(vals[0]), token.Session{SubjectMarker: text(vals[1]), ClientCutoff: cutoff(vals[2])}, nil
	}
	str, err := s.GetOpaque(ctx, key)
	if err != nil || str == "" {
		return "", token.Session{}, err
	}
	sub, cl, err := token.OpaqueRecordNames(str)
	if err != nil {
		return str, token.Session{}, nil
	}
	k := s.Keys(sub, cl, "", time.Time{})
	cmds := [2]*redis.StringCmd{redis.NewStringCmd(ctx, "get", k.Gen), redis.NewStringCmd(ctx, "get", k.Client)}
	// do returns the first command's error; a second's is in its command.
	if err := s.do(ctx, cmds[0], cmds[1]); err != nil && !errors.Is(err, redis.Nil) {
		return "", token.Session{}, unavailable(err)
	}
	var vals [2]any
	for i, cmd := range cmds {
		if vals[i], err = optional(cmd); err != nil {
			return "", token.Session{}, err
		}
	}
	return str, token.Session{SubjectMarker: text(vals[0]), ClientCutoff: cutoff(vals[1])}, nil
}

// GetOpaque returns the record key holds, or "" when it has none.
func (s *Store) GetOpaque(ctx context.Context, key string) (string, error) {
	get := redis.NewStringCmd(ctx, "get", key)
	if err := s.do(ctx, get); errors.Is(err, redis.Nil) {
		return "", nil
	} else if err != nil {
		return "", unavailable(err)
	}
	return get.Val(), nil
}
