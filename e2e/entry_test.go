package e2e

import (
	"context"
	"io"

	"github.com/snowtoken/snowtoken/cmd"
)

// run is the program's entry point in process, as main calls it.
func run(ctx context.Context, args []string, env map[string]string, stdout io.Writer) error {
	return cmd.Run(ctx, args, env, stdout)
}

// exitCode is the exit code main gives for err.
func exitCode(err error, stderr io.Writer) int { return cmd.ExitCode(err, stderr) }
