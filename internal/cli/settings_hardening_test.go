package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/dbtest"
)

func TestParseHardening(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	c, err := parseConfig([]string{"--data", "/var/lib/sy"}, none, &bytes.Buffer{})
	require.NoError(t, err)
	h := c.hardening
	require.Empty(t, h.trustedProxies)
	require.Equal(t, "/var/lib/sy/audit-checkpoints.jsonl", h.auditCheckpointFile)
	require.EqualValues(t, 1000, h.auditCheckpointRows)
	require.Equal(t, 24*time.Hour, h.idempotencyTTL)
	require.Equal(t, 720*time.Hour, h.retention.InboxEvents)
	require.Equal(t, 30*time.Second, h.retention.StatementTimeout)

	c, err = parseConfig([]string{"--trusted-proxies", "10.0.0.0/8, 192.0.2.1", "--retain-replay-jobs", "48h"}, none, &bytes.Buffer{})
	require.NoError(t, err)
	require.Len(t, c.hardening.trustedProxies, 2)
	require.Equal(t, 48*time.Hour, c.hardening.retention.ReplayJobs)

	for args, want := range map[string][]string{
		"invalid --trusted-proxies":       {"--trusted-proxies", "10.0.0.0/99"},
		"invalid --retain-inbox-events":   {"--retain-inbox-events", "a month"},
		"invalid --retention-interval":    {"--retention-interval", "1ms"},
		"invalid audit checkpoint rows":   {"--audit-checkpoint-rows", "0"},
		"invalid --idempotency-ttl \"0\"": {"--idempotency-ttl", "0"},
	} {
		_, err := parseConfig(want, none, &bytes.Buffer{})
		require.ErrorContains(t, err, args)
	}
}

// `console audit verify` with the key and the checkpoint file of a serve
// that sealed the trail: intact, then after rows were deleted from the
// end, not intact, saying so.
func TestAuditVerifyChecksSealsAndTheLastCheckpoint(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	dir := t.TempDir()
	keyFile, checkpoints := filepath.Join(dir, "audit.key"), filepath.Join(dir, "audit.jsonl")
	require.NoError(t, os.WriteFile(keyFile, []byte("  0123456789abcdef0123456789abcdef\n"), 0o600))
	env := map[string]string{"DATABASE_URL": dbURL, "SWITCHYARD_AUDIT_KEY_FILE": keyFile, "SWITCHYARD_AUDIT_CHECKPOINT_FILE": checkpoints}
	getenv := func(k string) string { return env[k] }
	for _, name := range []string{"alice", "bob", "carol"} {
		var out bytes.Buffer
		require.Equal(t, 0, run([]string{"user", "add", "--role", "viewer", name}, getenv, bytes.NewBufferString("correct horse battery\n"), &out, &out), out.String())
	}
	cfg, err := parseConfig(nil, getenv, &bytes.Buffer{})
	require.NoError(t, err)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	stop, err := startAnchors(ctx, cfg, pool, slog.New(slog.NewTextHandler(t.Output(), nil)))
	require.NoError(t, err)
	stop() // a last seal and checkpoint

	var out bytes.Buffer
	require.Equal(t, 0, run([]string{"audit", "verify"}, getenv, nil, &out, &out), out.String())
	require.Contains(t, out.String(), "seals: 3 rows match their seal")
	require.Contains(t, out.String(), "3 rows (keyed: true)")
	require.Contains(t, out.String(), "audit trail intact")

	for _, sql := range []string{
		`ALTER TABLE switchyard.audit_log DISABLE TRIGGER audit_log_no_update`,
		`DELETE FROM switchyard.audit_log WHERE id = (SELECT max(id) FROM switchyard.audit_log)`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	out.Reset()
	require.Equal(t, 1, run([]string{"audit", "verify"}, getenv, nil, &out, &out), out.String())
	require.Contains(t, out.String(), "audit trail NOT intact")
	require.Contains(t, out.String(), "truncated")

	env["SWITCHYARD_AUDIT_KEY_FILE"] = filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(env["SWITCHYARD_AUDIT_KEY_FILE"], []byte("too short"), 0o600))
	out.Reset()
	require.Equal(t, 1, run([]string{"audit", "verify"}, getenv, nil, &out, &out))
	require.Contains(t, out.String(), "want 32 or more")
}
