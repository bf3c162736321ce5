package dpop

import (
	"slices"
	"strings"
)

// checkedHeader is a proof header that passed steps 3 and 4: its alg, its
// key and the key's thumbprint.
type checkedHeader struct {
	alg   string
	key   JWK
	thumb string
}

// Bounds of Checker's cache of checked headers: how many, and how long
// one may be (a client's header is about 150 bytes; a longer one, padded
// with members that are ignored, is checked every time).
const (
	maxHeaders   = 4096
	maxHeaderLen = 512
)

// header checks a proof's header segment (steps 3 and 4 of the package
// doc) and returns what it says, and whether it came from the cache. A
// client signs every proof with one key, so its header segment is the same
// each time: a header of a proof whose signature verified is remembered
// (remember), by its exact bytes, and the next proof with it skips the
// JSON, the key's decoding and point checks and the thumbprint, about a
// third of a proof's checks besides its signature (BenchmarkCheck). The
// signature of every proof is checked all the same.
func (c *Checker) header(seg string) (*checkedHeader, bool, error) {
	c.mu.Lock()
	h, ok := c.headers[seg]
	c.mu.Unlock()
	if ok {
		return h, true, nil
	}
	var raw header
	if err := strictUnmarshal(seg, partHeader, &raw); err != nil {
		return nil, false, refuse(ErrProof, "%v", err)
	}
	// A media type, so compared without case, and "application/" may be
	// left out of it (RFC 7515 §4.1.9).
	switch typ := strings.ToLower(raw.Typ); {
	case typ == "":
		return nil, false, refuse(ErrType, "header member typ is missing: it must be %s", Typ)
	case typ != Typ && typ != "application/"+Typ:
		return nil, false, refuse(ErrType, "typ is %.32q, not %s", raw.Typ, Typ)
	}
	if raw.Crit != nil {
		return nil, false, refuse(ErrProof, "the header has crit, which is not accepted")
	}
	switch {
	case raw.Alg == "":
		return nil, false, refuse(ErrAlgorithm, "header member alg is missing: sign with %s", strings.Join(c.algs, " or "))
	case !slices.Contains(c.algs, raw.Alg):
		return nil, false, refuse(ErrAlgorithm, "alg %.16q is not accepted: sign with %s", raw.Alg, strings.Join(c.algs, " or "))
	}
	if raw.JWK == nil {
		return nil, false, refuse(ErrJWK, "the header has no jwk, the public key that signed the proof")
	}
	key, err := ParseJWK(raw.JWK)
	if err != nil {
		return nil, false, err
	}
	return &checkedHeader{alg: raw.Alg, key: key, thumb: key.Thumbprint()}, false, nil
}

// remember keeps h, the header seg of a proof whose signature verified,
// unless seg is longer than maxHeaderLen; at maxHeaders one remembered
// header (any: map order) makes room, so that no one can empty the cache
// of the others at once.
func (c *Checker) remember(seg string, h *checkedHeader) {
	if len(seg) > maxHeaderLen {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.headers) >= maxHeaders {
		for k := range c.headers {
			delete(c.headers, k)
			break
		}
	}
	c.headers[seg] = h
}
