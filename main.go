// Command snowtoken issues and checks session tokens built on Snowflake IDs.
//
//	snowtoken                      serve (configured by SNOWTOKEN_* variables; see -h)
//	snowtoken client new -id ID -scopes a,b [-may-set-subject] [-may-introspect] [-admin] [-max-ttl 1h]
//	snowtoken client revoke -id ID
//	snowtoken keys new -out FILE
//	snowtoken init -dir DIR [-client-id demo] [-scopes a,b]
//	snowtoken id decode ID
//	snowtoken healthcheck
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "snowtoken:", err)
		os.Exit(1)
	}
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
		return healthcheck(ctx, env)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return nil
	default:
		usage(stdout)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
