// Command snowtoken issues and checks session tokens built on Snowflake IDs.
//
//	snowtoken                      serve (configured by SNOWTOKEN_* variables; see -h)
//	snowtoken client new|rotate-secret|list|disable|enable|remove|revoke ...   (client -h)
//	snowtoken keys new -out FILE
//	snowtoken keys rotate -dir DIR [-max-token-ttl 24h] [-adopt FILE]
//	snowtoken keys list -dir DIR
//	snowtoken init -dir DIR [-client-id demo] [-scopes a,b] [-redis-password-file FILE]
//	snowtoken id decode ID
//	snowtoken healthcheck
//	snowtoken version
//	snowtoken help [COMMAND]
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := exitCode(run(ctx, os.Args[1:], environ(), os.Stdout), os.Stderr)
	stop()
	os.Exit(code)
}

// environ returns the process's environment by name.
func environ() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if name, value, ok := strings.Cut(kv, "="); ok {
			env[name] = value
		}
	}
	return env
}

// run is the whole program: main only supplies the process's context,
// arguments, environment (every variable, so that config.LoadEnv can refuse
// an unknown SNOWTOKEN_ one) and output.
func run(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	if len(args) == 0 {
		return serve(ctx, env, stdout)
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
		return serve(ctx, env, stdout)
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
			return run(ctx, append(slices.Clone(args[1:]), "-h"), env, stdout)
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
