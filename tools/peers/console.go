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
	"time"
)

// consoleDrain runs `console bench dispatch --messages n --aggregates k`,
// with the extra flags after them, against dsn and reads the JSON object
// it prints as its last line.
func consoleDrain(ctx context.Context, console, dsn string, n, aggregates int, extra ...string) (runResult, error) {
	args := append([]string{"--messages", strconv.Itoa(n), "--aggregates", strconv.Itoa(aggregates)}, extra...)
	var out struct {
		MessagesPerSec float64         `json:"messages_per_sec"`
		Seconds        float64         `json:"seconds"`
		Messages       int             `json:"messages"`
		CPU            json.RawMessage `json:"cpu"`
		HTTPFloor      *httpFloor      `json:"http_floor"`
	}
	if err := consoleBench(ctx, console, dsn, args, &out); err != nil {
		return runResult{}, err
	}
	if out.Messages != n || out.MessagesPerSec <= 0 {
		return runResult{}, fmt.Errorf("console bench dispatch reported %d messages at %v/s, want %d", out.Messages, out.MessagesPerSec, n)
	}
	return runResult{MessagesPerSec: out.MessagesPerSec, Seconds: out.Seconds, CPU: out.CPU, HTTPFloor: out.HTTPFloor}, nil
}

// consoleOffered runs `console bench dispatch --rate r --warmup-seconds
// warmup --seconds s --enqueuers e --aggregates k --wake w --wake-cooldown
// c` against dsn and reads its latency from each enqueue's COMMIT to the
// message's delivery.
func consoleOffered(ctx context.Context, console, dsn string, rate, warmup, seconds, enqueuers, aggregates int, wake string, cooldown time.Duration) (latencyRun, error) {
	args := []string{"--rate", strconv.Itoa(rate), "--warmup-seconds", strconv.Itoa(warmup), "--seconds", strconv.Itoa(seconds),
		"--enqueuers", strconv.Itoa(enqueuers), "--aggregates", strconv.Itoa(aggregates), "--wake", wake, "--wake-cooldown", cooldown.String()}
	var out struct {
		Messages       int     `json:"messages"`
		EnqueuedPerSec float64 `json:"enqueued_per_sec"`
		CommitP50Ms    float64 `json:"commit_p50_ms"`
		CommitP99Ms    float64 `json:"commit_p99_ms"`
		CommitWindows  int     `json:"commit_p99_windows"`
		EnqueueP99Ms   float64 `json:"enqueue_p99_ms"`
		P99Ms          float64 `json:"p99_ms"` // from the enqueuing transaction's start
		WarmupP99Ms    float64 `json:"warmup_commit_p99_ms"`
		CPU            cpu     `json:"cpu"`
	}
	if err := consoleBench(ctx, console, dsn, args, &out); err != nil {
		return latencyRun{}, err
	}
	if out.Messages != rate*seconds || out.CommitP99Ms <= 0 {
		return latencyRun{}, fmt.Errorf("console bench dispatch reported %d messages, commit p99 %v ms; want %d messages", out.Messages, out.CommitP99Ms, rate*seconds)
	}
	return latencyRun{Messages: out.Messages, EnqueuedPerSec: out.EnqueuedPerSec,
		P50Ms: out.CommitP50Ms, P99Ms: out.CommitP99Ms, P99Windows: out.CommitWindows, EnqueueP99Ms: out.EnqueueP99Ms, P99FromBeginMs: out.P99Ms,
		WarmupP99Ms: out.WarmupP99Ms, CPU: out.CPU}, nil
}

// consoleBench runs `console bench dispatch` with args against dsn and
// decodes the JSON object it prints as its last line into out.
func consoleBench(ctx context.Context, console, dsn string, args []string, out any) error {
	cmd := exec.CommandContext(ctx, console, append([]string{"bench", "dispatch"}, args...)...)
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
		return fmt.Errorf("console bench dispatch: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		return fmt.Errorf("read the console bench's JSON line %q: %w", lines[len(lines)-1], err)
	}
	return nil
}
