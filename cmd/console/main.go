// Command console is Switchyard's one binary: the web console (serve), the
// dispatcher (dispatch), the demo (internal/demo), the benchmarks
// (internal/bench) and the administrative commands (migrate, user, audit).
// Its command line and composition live in internal/cli, which the public
// package switchyard also runs inside other programs.
package main

import (
	"os"

	"github.com/switchyard/switchyard/internal/cli"
)

func main() {
	os.Exit(cli.Main(cli.Options{}))
}
