package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// runOnce runs the binary with args to its end, its output in logPath.
func runOnce(ctx context.Context, binary string, env []string, logPath string, args ...string) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %v (log: %s): %w", binary, args, logPath, err)
	}
	return nil
}
