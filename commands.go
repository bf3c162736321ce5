package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/snowtoken/snowtoken/client/probe"
	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/snowflakealg"
	"github.com/snowtoken/snowtoken/token"
)

// usage prints what snowtoken does, its commands and its environment.
func usage(w io.Writer) {
	fmt.Fprint(w, `snowtoken: Snowflake-ID session tokens over HTTP

Usage:
  snowtoken [serve]                      run the issuer, configured by the environment below
`)
	clientUsage(w)
	fmt.Fprint(w, `  snowtoken keys new -out FILE           write a new Ed25519 signing key (PEM)
  snowtoken keys rotate -dir DIR [-max-token-ttl 24h]
                                         one step of a key rotation in a keys directory: add a next key,
                                         activate it once published long enough, drop expired retired keys
  snowtoken keys list -dir DIR           the keys of a keys directory, their states and next steps
  snowtoken init -dir DIR [-client-id demo] [-scopes a,b] [-redis-password-file FILE]
                                         create a signing key, a clients file and a Redis password in DIR, never overwriting (Compose init)
  snowtoken id decode ID                 print an ID's time, worker and sequence
  snowtoken healthcheck                  exit 0 when the local issuer is ready (Docker HEALTHCHECK)
  snowtoken version                      print the module version and VCS revision
  snowtoken help [COMMAND]               this text, or a command's (as COMMAND -h)

Environment:
`)
	config.Usage(w)
}

// keysCmd writes a new signing key, never over an existing file; the
// subcommands of a keys directory are keysStateCmd's.
func keysCmd(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		return keysStateCmd(args, stdout, time.Now)
	}
	fs := newCmdFlags("keys new", "-out FILE", "Write a new Ed25519 signing key (PEM), never over an existing file.", stdout)
	out := fs.String("out", "", "file to write the PEM private key to (must not exist)")
	if err := fs.parse(args[1:], "out"); err != nil {
		return err
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
	f := newCmdFlags("id decode", "ID", "Print an ID's time, worker and sequence, by the layout and epoch of SNOWTOKEN_BITS and SNOWTOKEN_EPOCH.", stdout)
	switch {
	case len(args) == 0:
		return usageErrorf("id", "missing subcommand: decode")
	case isHelp(args[0]):
		f.usage()
		return nil
	case args[0] != "decode":
		return usageErrorf("id", "unknown subcommand %q: decode", args[0])
	}
	if err := f.parseArgs(args[1:], 1); err != nil {
		return err
	}
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return err
	}
	id, err := snowflakealg.ParseID(f.Arg(0))
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
func healthcheck(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	f := newCmdFlags("healthcheck", "", "Exit 0 when the issuer on SNOWTOKEN_ADDR answers /readyz with 200, else 1 (a Docker HEALTHCHECK).", stdout)
	if err := f.parse(args); err != nil {
		return err
	}
	cfg, err := config.LoadEnv(env)
	if err != nil {
		return err
	}
	return probe.Get(ctx, cfg.LocalURL()+"/readyz")
}
