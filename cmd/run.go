// Package cmd holds the snowtoken command line: Run dispatches to one file
// per command. The server itself (serve) is composed in cmd/server.
//
//	snowtoken                      serve (configured by SNOWTOKEN_* variables; see -h)   server.Serve
//	snowtoken client new|rotate-secret|list|disable|enable|remove|revoke ...   client*.go
//	snowtoken keys new|rotate|list ...                                         keys.go
//	snowtoken init -dir DIR ...                                                init.go
//	snowtoken id decode ID                                                     id.go
//	snowtoken healthcheck                                                      healthcheck.go
//	snowtoken version                                                          version.go
//	snowtoken help [COMMAND]                                                   run.go
package cmd

import (
	"context"
	"fmt"
	"io"
	"slices"

	"strings"

	"github.com/snowtoken/snowtoken/cmd/server"
	"github.com/snowtoken/snowtoken/config"
)

// Run is the whole program: main only supplies the process's context,
// arguments, environment (every variable, so that config.LoadEnv can refuse
// an unknown SNOWTOKEN_ one) and output. ExitCode turns its error into the
// process's exit code.
func Run(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	if len(args) == 0 {
		return server.Serve(ctx, env, stdout)
	}
	switch args[0] {
	case "serve":
		if len(args) > 1 {
			if isHelp(args[1]) {
				usage(stdout)
				return nil
			}
			return usageErrorf("serve", "unexpected argument %q: the issuer is configured by the SNOWTOKEN_* variables", args[1])
		}
		return server.Serve(ctx, env, stdout)
	case "client":
		return clientCmd(ctx, args[1:], env, stdout)
	case "keys":
		return keysCmd(args[1:], stdout)
	case "init":
		return initCmd(args[1:], stdout)
	case "id":
		return idCmd(args[1:], env, stdout)
	case "healthcheck":
		return healthcheck(ctx, args[1:], env, stdout)
	case "version", "-version", "--version":
		return versionCmd(args[1:], stdout)
	case "help":
		if len(args) > 1 && !isHelp(args[1]) { // help COMMAND...: COMMAND... -h
			return Run(ctx, append(slices.Clone(args[1:]), "-h"), env, stdout)
		}
		usage(stdout)
		return nil
	case "-h", "-help", "--help":
		usage(stdout)
		return nil
	case "":
		return usageErrorf("", "empty command")
	}
	if strings.HasPrefix(args[0], "-") {
		return usageErrorf("", "unknown flag %s", args[0])
	}
	return usageErrorf("", "unknown command %q", args[0])
}

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
  snowtoken init -dir DIR [-client-id demo] [-scopes a,b] [-redis-password-file FILE] [-feed-client-id ID [-feed-secret-file FILE]]
                                         create a signing key, a clients file (and a feed client) and a Redis password in DIR,
                                         never overwriting (Compose init)
  snowtoken id decode ID                 print an ID's time, worker and sequence
  snowtoken healthcheck                  exit 0 when the local issuer is ready (Docker HEALTHCHECK)
  snowtoken version                      print the module version and VCS revision
  snowtoken help [COMMAND]               this text, or a command's (as COMMAND -h)

Environment:
`)
	config.Usage(w)
}
