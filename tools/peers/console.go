package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// consoleDrain runs `console bench dispatch --messages n --aggregates k`,
// with the extra flags after them, against dsn and reads the JSON object
// it prints as its last line.
func consoleDrain(ctx context.Context, console, dsn string, n, aggregates int, extra ...string) (runResult, error) {
	args := append([]string{"bench", "dispatch", "--messages", strconv.Itoa(n), "--aggregates", strconv.Itoa(aggregates)}, extra...)
	cmd := exec.CommandContext(ctx, console, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "DATABASE_URL="+dsn)
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(stderr.Bytes())
		return runResult{}, fmt.Errorf("console bench dispatch: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var out struct {
		MessagesPerSec float64         `json:"messages_per_sec"`
		Seconds        float64         `json:"seconds"`
		Messages       int             `json:"messages"`
		CPU            json.RawMessage `json:"cpu"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &out); err != nil {
		return runResult{}, fmt.Errorf("read the console bench's JSON line %q: %w", lines[len(lines)-1], err)
	}
	if out.Messages != n || out.MessagesPerSec <= 0 {
		return runResult{}, fmt.Errorf("console bench dispatch reported %d messages at %v/s, want %d", out.Messages, out.MessagesPerSec, n)
	}
	return runResult{MessagesPerSec: out.MessagesPerSec, Seconds: out.Seconds, CPU: out.CPU}, nil
}
