package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/snowtoken/snowtoken/token"
)

// What a Store holds on one token's session, as the domain reads it
// (token.Session): the keys a handle holds, and their reads.

// sessionKeys are the keys that decide whether one JWT is live: its
// record, its subject's marker and its client's revocation time (see the
// package doc). A SessionHandle of a Store holds them, with the store that
// made them.
type sessionKeys struct {
	record, gen, client string
	store               *Store
	// opaque is set for an opaque token's record (OpaqueHandle): its
	// marker counts only if the record names ref's subject and client.
	opaque *token.SessionRef
}

// keys returns the keys of the JWT jti of subject and client, in one
// string, so that they cost one allocation.
func (s *Store) keys(subject, client, jti string) sessionKeys {
	const gen, clientTag = "gen", "client:{"
	p := s.prefix
	var b strings.Builder
	b.Grow(3*len(p) + 2*(len(subject)+3) + len(jti) + len(gen) + len(clientTag) + len(client) + 1)
	for _, suffix := range [...]string{jti, gen} {
		b.WriteString(p)
		b.WriteByte('{')
		b.WriteString(subject)
		b.WriteString("}:")
		b.WriteString(suffix)
	}
	b.WriteString(p)
	b.WriteString(clientTag)
	b.WriteString(client)
	b.WriteByte('}')
	all := b.String()
	n1 := len(p) + len(subject) + 3 + len(jti)
	n2 := n1 + len(p) + len(subject) + 3 + len(gen)
	return sessionKeys{record: all[:n1], gen: all[n1:n2], client: all[n2:], store: s}
}

// Handle returns the handle on the session of the JWT ref, which holds
// its keys (sessionKeys), for Session.
func (s *Store) Handle(ref token.SessionRef) token.SessionHandle {
	k := s.keys(ref.Subject, ref.Client, ref.JTI)
	return token.NewSessionHandle(&k)
}

// OpaqueHandle returns the handle on the record of the opaque token
// ref.JTI, read as a session of ref.Subject and ref.Client (Session):
// the record's key in place of a JWT's, the same marker and client keys.
func (s *Store) OpaqueHandle(ref token.SessionRef) token.SessionHandle {
	k := s.keys(ref.Subject, ref.Client, ref.JTI)
	k.record, k.opaque = s.opaqueKey(ref.JTI), &ref
	return token.NewSessionHandle(&k)
}

// handleKeys returns the keys h holds, or errForeignHandle.
func (s *Store) handleKeys(h token.SessionHandle) (*sessionKeys, error) {
	k, ok := h.Value().(*sessionKeys)
	if !ok || k.store != s {
		return nil, errForeignHandle
	}
	return k, nil
}

// session is what vals, the values of k's record, marker and client
// keys, say of its token: an opaque record's marker counts only if the
// record reads and names k's subject and client.
func (k *sessionKeys) session(vals [3]any) token.Session {
	marker := text(vals[0])
	if k.opaque != nil && marker != "" {
		rec, m, err := decodeRecord(marker)
		if err != nil || rec.Subject != k.opaque.Subject || rec.Client != k.opaque.Client {
			m = ""
		}
		marker = m
	}
	return token.Session{Marker: marker, SubjectMarker: text(vals[1]), ClientCutoff: cutoff(vals[2])}
}

// Session returns what Redis holds on the token of h: the marker its record
// holds, the subject's marker and the client's revocation time, each
// missing key as its zero (token.SessionLive decides on them: a missing
// marker, lost to eviction or a failover or restart that did not keep it,
// fails closed); token.ErrUnavailable when Redis does not answer. It is one
// MGET of the three keys, or on a Cluster (where the client's key is in
// another slot) an MGET and a GET in one pipeline.
// A handle this store did not make (Handle) is errForeignHandle.
func (s *Store) Session(ctx context.Context, h token.SessionHandle) (token.Session, error) {
	k, err := s.handleKeys(h)
	if err != nil {
		return token.Session{}, err
	}
	if k.opaque != nil { // the record is in a slot of its own: Sessions' paths
		out, err := s.Sessions(ctx, []token.SessionHandle{h})
		if err != nil {
			return token.Session{}, err
		}
		return out[0], nil
	}
	var vals []any
	if s.cluster {
		cmd, client := redis.NewSliceCmd(ctx, "mget", k.record, k.gen), redis.NewStringCmd(ctx, "get", k.client)
		if err := s.do(ctx, cmd, client); err != nil && !errors.Is(err, redis.Nil) {
			return token.Session{}, unavailable(err)
		}
		vals = append(cmd.Val(), nil)
		if v, err := client.Result(); err == nil {
			vals[2] = v
		}
	} else {
		cmd := redis.NewSliceCmd(ctx, "mget", k.record, k.gen, k.client)
		if err := s.do(ctx, cmd); err != nil {
			return token.Session{}, unavailable(err)
		}
		vals = cmd.Val()
	}
	if len(vals) != 3 {
		return token.Session{}, unavailable(fmt.Errorf("mget of 3 keys answered %d values", len(vals)))
	}
	return k.session([3]any(vals)), nil
}

// Sessions returns what Redis holds on the tokens of hs, in order, as
// Session does on one: one MGET of every key on a single Redis or
// Sentinel; on a Cluster, where they span slots, a GET of each in one
// pipeline.
func (s *Store) Sessions(ctx context.Context, hs []token.SessionHandle) ([]token.Session, error) {
	ks := make([]*sessionKeys, len(hs))
	for i, h := range hs {
		k, err := s.handleKeys(h)
		if err != nil {
			return nil, err
		}
		ks[i] = k
	}
	vals := make([]any, 3*len(ks))
	if s.cluster {
		gets := make([]*redis.StringCmd, 0, len(vals))
		cmds := make([]redis.Cmder, 0, len(vals))
		for _, k := range ks {
			for _, key := range [...]string{k.record, k.gen, k.client} {
				get := redis.NewStringCmd(ctx, "get", key)
				gets, cmds = append(gets, get), append(cmds, get)
			}
		}
		// do returns the first command's error; the others' are in theirs.
		if err := s.do(ctx, cmds...); err != nil && !errors.Is(err, redis.Nil) {
			return nil, unavailable(err)
		}
		for i, get := range gets {
			v, err := optional(get)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
	} else {
		args := make([]any, 1, 1+len(vals))
		args[0] = "mget"
		for _, k := range ks {
			args = append(args, k.record, k.gen, k.client)
		}
		cmd := redis.NewSliceCmd(ctx, args...)
		if err := s.do(ctx, cmd); err != nil {
			return nil, unavailable(err)
		}
		if len(cmd.Val()) != len(vals) {
			return nil, unavailable(fmt.Errorf("mget of %d keys answered %d values", len(vals), len(cmd.Val())))
		}
		copy(vals, cmd.Val())
	}
	out := make([]token.Session, len(ks))
	for i, k := range ks {
		out[i] = k.session([3]any(vals[3*i : 3*i+3]))
	}
	return out, nil
}
