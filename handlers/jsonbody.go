package handlers

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/snowtoken/snowtoken/client/jwtpolicy"
	"github.com/snowtoken/snowtoken/internal/jsonw"
	"github.com/snowtoken/snowtoken/token"
)

// The bodies of the three hot answers (an issued token, a valid token, an
// active introspection) are written by hand instead of through
// encoding/json's reflection: under load that saves the issuer about a
// microsecond and several allocations per request. Their structs keep the
// json tags; TestAppendJSONMatchesEncodingJSON and jsonw.FuzzAppendString check the
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
	b = jsonw.AppendString(b, r.AccessToken)
	b = append(b, `,"token_type":`...)
	b = jsonw.AppendString(b, r.TokenType)
	b = append(b, `,"expires_in":`...)
	b = strconv.AppendInt(b, r.ExpiresIn, 10)
	b = append(b, `,"scope":`...)
	b = jsonw.AppendString(b, r.Scope)
	b = append(b, `,"jti":"`...)
	b = strconv.AppendInt(b, int64(r.JTI), 10)
	b = append(b, '"')
	if r.IssuedTokenType != "" {
		b = append(b, `,"issued_token_type":`...)
		b = jsonw.AppendString(b, r.IssuedTokenType)
	}
	return append(b, '}')
}

func (r *claimsResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"active":`...)
	b = strconv.AppendBool(b, r.Active)
	b = append(b, `,"sub":`...)
	b = jsonw.AppendString(b, r.Subject)
	b = append(b, `,"client_id":`...)
	b = jsonw.AppendString(b, r.ClientID)
	b = append(b, `,"scope":`...)
	b = jsonw.AppendString(b, r.Scope)
	b = append(b, `,"iss":`...)
	b = jsonw.AppendString(b, r.Issuer)
	if len(r.Audience) > 0 {
		b = append(b, `,"aud":[`...)
		for i, a := range r.Audience {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonw.AppendString(b, a)
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
		b = jsonw.AppendString(b, r.TokenType)
	}
	if r.Confirmation != nil {
		b = append(b, `,"cnf":{"jkt":`...)
		b = jsonw.AppendString(b, r.Confirmation.JKT)
		b = append(b, '}')
	}
	return appendChain(b, r.Act, r.Parents)
}

// appendChain appends an exchanged token's act and parents members, if any
// (token.AppendChain), and the closing brace.
func appendChain(b []byte, act *jwtpolicy.Actor, parents []jwtpolicy.Parent) []byte {
	if act != nil || len(parents) > 0 {
		b = token.AppendChain(append(b, ','), act, parents)
	}
	return append(b, '}')
}
