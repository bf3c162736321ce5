package cmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// usageError is a mistake in the command line: an unknown command or flag,
// a missing or malformed argument. main prints it on one line, then a hint
// to run the command with -h, and exits 2; every other error exits 1.
type usageError struct {
	cmd string // the command, such as "client new"; empty for snowtoken itself
	msg string
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.msg
	}
	return e.cmd + ": " + e.msg
}

// usageErrorf returns a usageError of cmd.
func usageErrorf(cmd, format string, args ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, args...)}
}

// isHelp reports whether arg asks for the usage.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// ExitCode writes what err says to stderr and returns the process's exit
// status: 0 for none (and for flag.ErrHelp: the usage was asked for and
// printed), 2 for a usageError, with a hint where the usage is, else 1.
func ExitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "snowtoken:", err)
		fmt.Fprintf(stderr, "run '%s -h' for usage\n", strings.TrimSpace("snowtoken "+ue.cmd))
		return 2
	default:
		fmt.Fprintln(stderr, "snowtoken:", err)
		return 1
	}
}

// cmdFlags is the flag set of one subcommand. Its -h prints the usage to
// stdout and returns flag.ErrHelp, which ExitCode takes for success; any other
// mistake in the flags is a usageError naming the subcommand.
type cmdFlags struct {
	*flag.FlagSet
	synopsis string // the arguments after the command's name
	about    string // what the command does, a sentence or two
	stdout   io.Writer
}

// newCmdFlags returns the flag set of the subcommand name ("client new").
func newCmdFlags(name, synopsis, about string, stdout io.Writer) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors come back as usageErrors, printed once by main
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, synopsis: synopsis, about: about, stdout: stdout}
}

// parse parses args, which must hold no arguments other than flags, and
// checks that each flag named in required was given a value.
func (f *cmdFlags) parse(args []string, required ...string) error {
	if err := f.parseArgs(args, 0); err != nil {
		return err
	}
	for _, name := range required {
		if f.Lookup(name).Value.String() == "" {
			return usageErrorf(f.Name(), "-%s is required", name)
		}
	}
	return nil
}

// parseArgs parses args, which must end with exactly n arguments after the
// flags.
func (f *cmdFlags) parseArgs(args []string, n int) error {
	err := f.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.usage()
		return flag.ErrHelp
	case err != nil:
		return usageErrorf(f.Name(), "%v", err)
	case f.NArg() > n:
		return usageErrorf(f.Name(), "unexpected argument %q", f.Arg(n))
	case f.NArg() < n:
		return usageErrorf(f.Name(), "missing argument: usage: snowtoken %s %s", f.Name(), f.synopsis)
	}
	return nil
}

// usage prints the synopsis, what the command does and its flags.
func (f *cmdFlags) usage() {
	fmt.Fprintf(f.stdout, "usage: snowtoken %s %s\n\n%s\n", f.Name(), f.synopsis, f.about)
	hasFlags := false
	f.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(f.stdout, "\nflags:")
		f.SetOutput(f.stdout)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

// commaList splits a list flag such as -scopes "a,b" or "a, b" into its
// items: commas and spaces separate them, as neither can be in an item.
func commaList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}
