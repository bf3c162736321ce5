package cmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/snowtoken/snowtoken/config"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

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
