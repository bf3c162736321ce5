// Command snowtoken issues and checks session tokens built on Snowflake IDs.
// Every command is in package cmd (cmd.Run); the server is composed in
// cmd/server. main only supplies the process's context, arguments,
// environment and output, and turns the result into the exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/snowtoken/snowtoken/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := cmd.ExitCode(cmd.Run(ctx, os.Args[1:], environ(), os.Stdout), os.Stderr)
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
