package cmd

import (
	"context"
	"fmt"
	"time"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// Revoking a client's tokens from the command line: client revoke, and
// -revoke of client disable and remove.

// withRevoke runs edit, then, if revoke, revokes the client's tokens in
// Redis, then reports the file (written.report). The Redis settings are
// checked first, so that a missing one stops the command before the file
// changes.
func withRevoke(ctx context.Context, f *cmdFlags, env map[string]string, id string, revoke bool, replicas *replicaCheck, edit func() (*written, error), done string) error {
	var revoker *clientRevoker
	if revoke {
		var err error
		if revoker, err = newClientRevoker(f.Name(), env); err != nil {
			return err
		}
		defer revoker.close()
	}
	w, err := edit()
	if err != nil {
		return err
	}
	fmt.Fprintln(f.stdout, done)
	if revoker != nil {
		if err := revoker.revoke(ctx, id); err != nil {
			return fmt.Errorf("%w (the file is written: run snowtoken client revoke -id %s to revoke its tokens)", err, id)
		}
		fmt.Fprintf(f.stdout, "revoked every token of client %s\n", id)
	}
	w.report(ctx, f.stdout, replicas)
	return nil
}

// clientRevokeCmd revokes every token of a client: see clientSubs.
func clientRevokeCmd(ctx context.Context, f *cmdFlags, args []string, env map[string]string, _ time.Time) error {
	id := f.String("id", "", "client id whose tokens to revoke (required)")
	if err := f.parse(args, "id"); err != nil {
		return err
	}
	r, err := newClientRevoker(f.Name(), env)
	if err != nil {
		return err
	}
	defer r.close()
	if err := r.revoke(ctx, *id); err != nil {
		return err
	}
	fmt.Fprintf(f.stdout, "revoked every token of client %s\n", *id)
	return nil
}

// clientRevoker revokes a client's tokens, as DELETE /clients/{id}/tokens
// does, straight in the issuer's Redis.
type clientRevoker struct {
	cmd   string
	store *redisstore.Store
	close func()
}

// newClientRevoker connects to the Redis that the SNOWTOKEN_REDIS_*
// variables of env name, as the replicas do.
func newClientRevoker(cmd string, env map[string]string) (*clientRevoker, error) {
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	rdb := cfg.NewRedisClient()
	if rdb == nil {
		return nil, fmt.Errorf("%s: set the issuer's SNOWTOKEN_REDIS_* variables: it writes to the replicas' Redis", cmd)
	}
	store, err := redisstore.New(rdb, redisstore.Options{Timeout: cfg.RedisTimeout,
		LogRetention: token.LogRetention(cfg.MaxTokenTTL, token.DefaultLeeway)})
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return &clientRevoker{cmd: cmd, store: store, close: func() { store.Close(); rdb.Close() }}, nil
}

func (r *clientRevoker) revoke(ctx context.Context, id string) error {
	if err := r.store.RevokeClient(ctx, id, time.Now().Add(token.DefaultLeeway)); err != nil {
		return fmt.Errorf("%s: %w", r.cmd, err)
	}
	return nil
}
