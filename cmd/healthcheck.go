package cmd

import (
	"context"
	"io"

	"github.com/snowtoken/snowtoken/client/probe"
	"github.com/snowtoken/snowtoken/config"
)

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
