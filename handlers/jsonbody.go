package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
)

// The bodies of the three hot answers (an issued token, a valid token, an
// active introspection) are written by hand instead of through
// encoding/json's reflection: under load that saves the issuer about a
// microsecond and several allocations per request. Their structs keep the
// json tags; TestAppendJSONMatchesEncodingJSON and FuzzAppendString check the
// output against encoding/json.

// jsonBody is a response body that writes itself as JSON.
type jsonBody interface {
	appendJSON(b []byte) []byte
}

var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Header values the hot answers share, set in the header map directly as
// gin's own renderers set theirs: Header.Set and c.Data allocate a slice
// for each value, and c.Data its renderer, six of a client_credentials
// issue's 77 allocations (BenchmarkExchange). Nothing writes a header's
// value in place (Add and Set replace the slice).
var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	noStore         = []string{"no-store"}
	noCache         = []string{"no-cache"}
)

// setNoStore sets the headers of an answer that carries a new token (RFC
// 6749 §5.1): Cache-Control no-store, Pragma no-cache.
func setNoStore(h http.Header) {
	h["Cache-Control"], h["Pragma"] = noStore, noCache
}

// writeJSON answers with status and body as application/json, as c.Data
// does (the content type unless one is set already; a failed write is the
// context's error) without its allocations.
func writeJSON(c *gin.Context, status int, body jsonBody) {
	bp := bodyBufs.Get().(*[]byte)
	b := body.appendJSON((*bp)[:0])
	if h := c.Writer.Header(); len(h["Content-Type"]) == 0 {
		h["Content-Type"] = jsonContentType
	}
	c.Status(status)
	if _, err := c.Writer.Write(b); err != nil { // copies b into the connection's buffer
		_ = c.Error(err)
		c.Abort()
	}
	if cap(b) <= 64<<10 {
		*bp = b
		bodyBufs.Put(bp)
	}
}

func (r *tokenResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"access_token":`...)
	b = appendString(b, r.AccessToken)
	b = append(b, `,"token_type":`...)
	b = appendString(b, r.TokenType)
	b = append(b, `,"expires_in":`...)
	b = strconv.AppendInt(b, r.ExpiresIn, 10)
	b = append(b, `,"scope":`...)
	b = appendString(b, r.Scope)
	b = append(b, `,"jti":"`...)
	b = strconv.AppendInt(b, int64(r.JTI), 10)
	b = append(b, '"')
	if r.IssuedTokenType != "" {
		b = append(b, `,"issued_token_type":`...)
		b = appendString(b, r.IssuedTokenType)
	}
	return append(b, '}')
}

func (r *claimsResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"active":`...)
	b = strconv.AppendBool(b, r.Active)
	b = append(b, `,"sub":`...)
	b = appendString(b, r.Subject)
	b = append(b, `,"client_id":`...)
	b = appendString(b, r.ClientID)
	b = append(b, `,"scope":`...)
	b = appendString(b, r.Scope)
	b = append(b, `,"iss":`...)
	b = appendString(b, r.Issuer)
	if len(r.Audience) > 0 {
		b = append(b, `,"aud":[`...)
		for i, a := range r.Audience {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a)
		}
		b = append(b, ']')
	}
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, r.IssuedAt, 10)
	b = append(b, `,"exp":`...)
	b = strconv.AppendInt(b, r.ExpiresAt, 10)
	b = append(b, `,"jti":"`...)
	b = strconv.AppendInt(b, int64(r.JTI), 10)
	b = append(b, `","worker_id":`...)
	b = strconv.AppendInt(b, r.WorkerID, 10)
	if r.TokenType != "" {
		b = append(b, `,"token_type":`...)
		b = appendString(b, r.TokenType)
	}
	if r.Confirmation != nil {
		b = append(b, `,"cnf":{"jkt":`...)
		b = appendString(b, r.Confirmation.JKT)
		b = append(b, '}')
	}
	return appendChain(b, r.Act, r.Parents)
}

// appendChain appends an exchanged token's act and parents members, if any,
// and the closing brace: through encoding/json, which only an exchanged
// token's answer pays for (their strings are names and IDs).
func appendChain(b []byte, act *jwtpolicy.Actor, parents []jwtpolicy.Parent) []byte {
	if act != nil {
		a, _ := json.Marshal(act) // plain strings and pointers: never fails
		b = append(append(b, `,"act":`...), a...)
	}
	if len(parents) > 0 {
		p, _ := json.Marshal(parents)
		b = append(append(b, `,"parents":`...), p...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string, escaped the way encoding/json
// escapes it: quotes, backslashes and control characters, also <, > and &
// and U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control characters, <, > and &
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
