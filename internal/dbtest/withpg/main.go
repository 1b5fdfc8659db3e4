// Command withpg runs a command with TEST_DATABASE_URL pointing at a private
// throwaway PostgreSQL cluster, so that one `go test ./...` run shares one
// cluster across all its test binaries instead of starting one each:
//
//	go run ./internal/dbtest/withpg go test -race ./...
//
// The cluster stops when the command ends; it is kept on disk if the command
// failed. withpg exits with the command's exit code. With -durable first,
// the cluster keeps fsync on (dbtest.StartDurableCluster), for benchmarks
// such as tools/peers.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	start := dbtest.StartCluster
	if len(args) > 0 && args[0] == "-durable" {
		start, args = dbtest.StartDurableCluster, args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withpg [-durable] COMMAND [ARG...]")
		return 2
	}
	if os.Getenv(dbtest.EnvURL) != "" {
		return runChild(args, nil) // already inside a run: reuse its server
	}
	cluster, err := start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "withpg:", err)
		return 1
	}
	defer cluster.Stop()
	code := runChild(args, []string{dbtest.EnvURL + "=" + cluster.URL})
	cluster.KeepIf(code != 0)
	return code
}

// runChild runs the command in our process group, so a Ctrl-C reaches it
// directly; we ignore the signal ourselves and clean up when it has exited.
func runChild(args, extraEnv []string) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), extraEnv...)
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.ExitCode()
	default:
		fmt.Fprintln(os.Stderr, "withpg:", err)
		return 1
	}
}
