package jwtpolicy

import (
	"math/bits"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// decodeIssued decodes b into c if b is claims in the shape the issuer
// writes, and reports whether it did; if not, c is unchanged and
// decodeStrict must decide. The shape: one object, with JSON white space
// anywhere between tokens, whose members are known claims, each at most once:
// iss, sub, jti, client_id and scope strings; cnf an object of exactly one
// non-empty jkt string; aud a string or an array of at
// most maxIssuedAud strings; exp, nbf and iat integers of at most 15 digits
// (which a float64, as golang-jwt reads them, holds exactly) or null. A
// string must hold valid UTF-8 with no escape and no control character.
// Anything else (an unknown or repeated member, an escape, a fraction or an
// exponent, a quoted date, trailing data) is not decodeIssued's to judge, so
// every error, and every decision on what is accepted, stays decodeStrict's.
// So are an exchanged token's chain claims (act, may_act, parents: unknown
// members here): such a token's claims take decodeStrict, once per
// verification (the verified-token cache keeps the result), which keeps
// their checks (chain.go) in one place.
//
// It is hand-written because encoding/json's token stream, which
// decodeStrict needs to see repeated names at any depth, costs allocations
// per token: an issued token's claims took 116 allocs/op and 3,440 B/op
// through decodeStrict, and take 3 allocs/op and 160 B/op here
// (BenchmarkClaimsUnmarshal/issued): one for the text of every string
// claim, one for the dates and one for aud. The issuer's cold validation
// went from 169 to 72 allocs/op and from 7.4 to 4.5 KiB/op (package token's
// BenchmarkValidate/cold). Trying it first costs an input it does not take
// no allocation (BenchmarkClaimsUnmarshal/other).
func decodeIssued(b []byte, c *Claims) bool {
	s := issuedScanner{b: b}
	var (
		seen  uint16
		strs  [mScope + 1]span
		aud   [maxIssuedAud]span
		nAud  int
		jkt   span     // cnf's
		dates [3]int64 // exp, nbf, iat, at m-mExp
		given uint8    // bit m-mExp: that date is a number, not null
	)
	if !s.next('{') {
		return false
	}
	for !s.next('}') {
		if seen != 0 && !s.next(',') {
			return false
		}
		name, ok := s.str()
		if !ok || !s.next(':') {
			return false
		}
		m := member(b[name.start:name.end])
		if m < 0 || seen&(1<<m) != 0 {
			return false
		}
		seen |= 1 << m
		switch {
		case m <= mScope:
			strs[m], ok = s.str()
		case m == mAud:
			nAud, ok = s.aud(&aud)
		case m == mCnf:
			jkt, ok = s.cnf()
		default:
			var null bool
			dates[m-mExp], null, ok = s.date()
			if !null {
				given |= 1 << (m - mExp)
			}
		}
		if !ok {
			return false
		}
	}
	if s.space(); s.i != len(b) {
		return false
	}

	var out Claims
	// One allocation for the text of every string claim, each a substring.
	total := 0
	for _, sp := range strs {
		total += sp.end - sp.start
	}
	for _, sp := range aud[:nAud] {
		total += sp.end - sp.start
	}
	total += jkt.end - jkt.start
	var text strings.Builder
	text.Grow(total)
	str := func(sp span) string {
		n := text.Len()
		text.Write(b[sp.start:sp.end])
		return text.String()[n:]
	}
	out.Issuer, out.Subject, out.ID = str(strs[mIss]), str(strs[mSub]), str(strs[mJTI])
	out.ClientID, out.Scope = str(strs[mClientID]), str(strs[mScope])
	out.Confirmation.JKT = str(jkt)
	if nAud > 0 {
		out.Audience = make(jwt.ClaimStrings, nAud)
		for k, sp := range aud[:nAud] {
			out.Audience[k] = str(sp)
		}
	}
	// One allocation for the dates, each as golang-jwt's NewNumericDate makes it.
	ds := make([]jwt.NumericDate, bits.OnesCount8(given))
	for k, d := range [...]**jwt.NumericDate{&out.ExpiresAt, &out.NotBefore, &out.IssuedAt} {
		if given&(1<<k) != 0 {
			ds[0] = jwt.NumericDate{Time: time.Unix(dates[k], 0).Truncate(jwt.TimePrecision)}
			*d, ds = &ds[0], ds[1:]
		}
	}
	*c = out
	return true
}

// The members decodeIssued knows: the string claims first, then aud, then
// the dates in the order of its dates array.
const (
	mIss = iota
	mSub
	mJTI
	mClientID
	mScope
	mAud
	mExp
	mNbf
	mIat
	mCnf
)

// maxIssuedAud is the most audiences decodeIssued takes; the issuer writes
// at most 4.
const maxIssuedAud = 8

// member returns the m* constant of a member name, or -1.
func member(name []byte) int {
	switch string(name) {
	case "iss":
		return mIss
	case "sub":
		return mSub
	case "jti":
		return mJTI
	case "client_id":
		return mClientID
	case "scope":
		return mScope
	case "aud":
		return mAud
	case "exp":
		return mExp
	case "nbf":
		return mNbf
	case "iat":
		return mIat
	case "cnf":
		return mCnf
	}
	return -1
}

// span is the text of a string, b[start:end], without its quotes.
type span struct{ start, end int }

// issuedScanner reads b from i on for decodeIssued. Each method skips the
// white space before what it reads, and reports false for anything it does
// not take, leaving i wherever it stopped.
type issuedScanner struct {
	b []byte
	i int
}

// space skips JSON white space.
func (s *issuedScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next reads c if it comes next.
func (s *issuedScanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string of valid UTF-8 with no escape and no control character.
func (s *issuedScanner) str() (span, bool) {
	if !s.next('"') {
		return span{}, false
	}
	start, high := s.i, false
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			if high && !utf8.Valid(s.b[start:j]) {
				return span{}, false
			}
			s.i = j + 1
			return span{start, j}, true
		case c == '\\' || c < ' ':
			return span{}, false
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return span{}, false
}

// aud reads a string or an array of at most len(out) strings into out, and
// returns how many it read.
func (s *issuedScanner) aud(out *[maxIssuedAud]span) (int, bool) {
	if s.space(); s.i < len(s.b) && s.b[s.i] == '"' {
		sp, ok := s.str()
		out[0] = sp
		return 1, ok
	}
	if !s.next('[') {
		return 0, false
	}
	if s.next(']') {
		return 0, true // golang-jwt's ClaimStrings leaves [] nil
	}
	for n := range out {
		sp, ok := s.str()
		if !ok {
			return 0, false
		}
		out[n] = sp
		if s.next(']') {
			return n + 1, true
		}
		if !s.next(',') {
			return 0, false
		}
	}
	return 0, false
}

// cnf reads {"jkt":"<non-empty>"}, the cnf the issuer writes.
func (s *issuedScanner) cnf() (span, bool) {
	if !s.next('{') {
		return span{}, false
	}
	name, ok := s.str()
	if !ok || string(s.b[name.start:name.end]) != "jkt" || !s.next(':') {
		return span{}, false
	}
	jkt, ok := s.str()
	if !ok || jkt.end == jkt.start || !s.next('}') {
		return span{}, false
	}
	return jkt, true
}

// date reads null, or a JSON integer of 1 to 15 digits into sec.
func (s *issuedScanner) date() (sec int64, null, ok bool) {
	s.space()
	if b := s.b[s.i:]; len(b) >= 4 && string(b[:4]) == "null" {
		s.i += 4
		return 0, true, true
	}
	neg := s.next('-')
	start := s.i
	for ; s.i < len(s.b) && s.i-start < 16; s.i++ {
		c := s.b[s.i]
		if c < '0' || c > '9' {
			break
		}
		sec = sec*10 + int64(c-'0')
	}
	if n := s.i - start; n == 0 || n > 15 || n > 1 && s.b[start] == '0' {
		return 0, false, false
	}
	if neg {
		sec = -sec
	}
	return sec, false, true
}
