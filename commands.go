package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"snowtoken/config"
	"snowtoken/internal/probe"
	"snowtoken/snowflakealg"
	"snowtoken/token"
)

func usage(w io.Writer) {
	fmt.Fprint(w, `snowtoken: Snowflake-ID session tokens over HTTP

Usage:
  snowtoken [serve]                      run the issuer
  snowtoken client new -id ID -scopes a,b [-may-set-subject] [-may-introspect] [-admin] [-max-ttl 1h]
                                         print a new client's secret (once) and its clients-file entry
  snowtoken client revoke -id ID         revoke every token of a client, in the Redis SNOWTOKEN_REDIS_* names
  snowtoken keys new -out FILE           write a new Ed25519 signing key (PEM)
  snowtoken init -dir DIR [-client-id demo] [-scopes a,b]
                                         create a signing key and a clients file in DIR, never overwriting (Compose init)
  snowtoken id decode ID                 print an ID's time, worker and sequence
  snowtoken healthcheck                  exit 0 when the local issuer is ready (Docker HEALTHCHECK)

Environment:
`)
	config.Usage(w)
}

// clientUsage lists the client subcommands.
const clientUsage = "usage: snowtoken client new -id ID -scopes a,b [-may-set-subject] [-may-introspect] [-admin] [-max-ttl 1h]\n" +
	"       snowtoken client revoke -id ID"

// clientCmd runs a client subcommand: new or revoke.
func clientCmd(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "revoke" {
		return clientRevokeCmd(ctx, args[1:], env, stdout)
	}
	if len(args) == 0 || args[0] != "new" {
		return errors.New(clientUsage)
	}
	fs := flag.NewFlagSet("client new", flag.ContinueOnError)
	fs.SetOutput(stdout)
	id := fs.String("id", "", "client id")
	scopes := fs.String("scopes", "", "comma-separated scopes the client may ask for")
	maySet := fs.Bool("may-set-subject", false, "client may issue tokens for other subjects")
	mayIntrospect := fs.Bool("may-introspect", false, "client may introspect tokens issued to other clients")
	admin := fs.Bool("admin", false, "client may revoke any token and all tokens of a subject")
	maxTTL := fs.Duration("max-ttl", 0, "longest lifetime of this client's tokens (0: the global maximum)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	secret, sum, err := token.NewClientSecret()
	if err != nil {
		return err
	}
	c := token.Client{ID: *id, SecretSHA256: sum, MaySetSubject: *maySet, MayIntrospect: *mayIntrospect, Admin: *admin, MaxTTL: token.Duration(*maxTTL)}
	for _, s := range strings.Split(*scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Scopes = append(c.Scopes, s)
		}
	}
	if _, err := token.NewClients([]token.Client{c}); err != nil {
		return err
	}
	entry, err := json.Marshal(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "client_id:     %s\nclient_secret: %s\n(the secret is shown only now; the file keeps its SHA-256)\n\nclients-file entry:\n%s\n", c.ID, secret, entry)
	return nil
}

// clientRevokeCmd revokes every token of a client, as DELETE
// /clients/{id}/tokens does, straight in the issuer's Redis (the
// SNOWTOKEN_REDIS_* variables of the replicas): for an operator who has
// Redis access but no admin client at hand.
func clientRevokeCmd(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	fs := flag.NewFlagSet("client revoke", flag.ContinueOnError)
	fs.SetOutput(stdout)
	id := fs.String("id", "", "client id whose tokens to revoke")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return errors.New(clientUsage)
	}
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return err
	}
	rdb := cfg.NewRedisClient()
	if rdb == nil {
		return errors.New("client revoke: set the issuer's SNOWTOKEN_REDIS_* variables: it writes to the replicas' Redis")
	}
	defer rdb.Close()
	store := token.NewStore(rdb, token.StoreOptions{Timeout: cfg.RedisTimeout})
	defer store.Close()
	if err := store.RevokeClient(ctx, *id, time.Now().Add(token.DefaultLeeway)); err != nil {
		return fmt.Errorf("client revoke: %w", err)
	}
	fmt.Fprintf(stdout, "revoked every token of client %s\n", *id)
	return nil
}

// keysCmd writes a new signing key, never over an existing file.
func keysCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		return errors.New("usage: snowtoken keys new -out FILE")
	}
	fs := flag.NewFlagSet("keys new", flag.ContinueOnError)
	fs.SetOutput(stdout)
	out := fs.String("out", "", "file to write the PEM private key to (must not exist)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("keys new: -out is required")
	}
	k, err := token.GenerateKey()
	if err != nil {
		return err
	}
	pemBytes, err := k.MarshalPEM()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("keys new: %w", err)
	}
	if _, err := f.Write(pemBytes); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (kid %s)\n", *out, k.ID)
	return nil
}

// idCmd decodes an ID with the configured layout and epoch.
func idCmd(args []string, env map[string]string, stdout io.Writer) error {
	if len(args) != 2 || args[0] != "decode" {
		return errors.New("usage: snowtoken id decode ID")
	}
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return err
	}
	id, err := snowflakealg.ParseID(args[1])
	if err != nil {
		return err
	}
	p, err := id.Parts(cfg.Bits, cfg.Epoch)
	if err != nil {
		return err
	}
	out, err := json.Marshal(p)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return nil
}

// healthcheck asks the local issuer's /readyz, for a Docker HEALTHCHECK in an
// image without curl.
func healthcheck(ctx context.Context, env map[string]string) error {
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return err
	}
	return probe.Get(ctx, cfg.LocalURL()+"/readyz")
}
