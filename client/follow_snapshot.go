package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/snowtoken/snowtoken/client/revocation"
)

// The snapshot (GET /revocations): the whole state, fetched when the
// issuer cannot resume the stream.

// snapshot fetches GET /revocations and makes it the state, stale until a
// heartbeat of the stream that resumes after it.
func (f *feed) snapshot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, f.v.opts.Timeout)
	defer cancel()
	nonce := f.newNonce()
	resp, err := f.request(ctx, f.snapURL+"?nonce="+nonce, map[string]string{"Accept": "application/jwt"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSnapshotBytes+1))
	if err != nil {
		return err
	}
	if len(body) > maxSnapshotBytes {
		return fmt.Errorf("the snapshot is over %d bytes", maxSnapshotBytes)
	}
	var cl revocation.SnapshotClaims
	if err := f.verify(ctx, string(body), revocation.TypeSnapshot, &cl); err != nil {
		return err
	}
	if cl.Nonce != nonce {
		return errors.New("a snapshot for another request (its nonce is not ours)")
	}
	if !f.inWindow(cl.IssuedAtMs, f.v.opts.Now()) {
		return errors.New("a snapshot signed outside MaxClockSkew of this clock")
	}
	st, err := revocation.FromSnapshot(f.v.stateOptions(), cl.SnapshotState, f.v.opts.Now())
	if err != nil {
		return errors.New("a snapshot whose last does not parse")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = st
	return nil
}
