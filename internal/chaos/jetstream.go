package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// The run's JetStream destination: an in-process NATS server with
// JetStream (as the jetstream package's tests run one), a stream that
// captures the destination's subjects and drops a republished message id
// within its duplicate window, and the destination row that points there.
const (
	jetstreamDestination = "chaos-js"
	jetstreamPrefix      = "chaos"
	jetstreamStream      = "CHAOS"
	// jetstreamDupWindow is the stream's duplicate window: longer than
	// any redelivery of the run (the retry cap is 30 s).
	jetstreamDupWindow = 5 * time.Minute
)

// natsServer is the run's NATS server and a connection to read its stream.
type natsServer struct {
	srv    *server.Server
	conn   *nats.Conn
	stream natsjs.Stream
}

// startNATS starts the server storing under dir, creates the stream, and
// adds the destination row.
func startNATS(ctx context.Context, dir string, db *database) (*natsServer, error) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: filepath.Join(dir, "nats"), NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	n := &natsServer{srv: srv}
	if !srv.ReadyForConnections(30 * time.Second) {
		n.close()
		return nil, errors.New("nats server not ready within 30 s")
	}
	if n.conn, err = nats.Connect(srv.ClientURL()); err != nil {
		n.close()
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	js, err := natsjs.New(n.conn)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	n.stream, err = js.CreateStream(ctx, natsjs.StreamConfig{Name: jetstreamStream, Subjects: []string{jetstreamPrefix + ".>"},
		Duplicates: jetstreamDupWindow, Storage: natsjs.FileStorage})
	if err != nil {
		n.close()
		return nil, fmt.Errorf("create the stream: %w", err)
	}
	if _, err := db.admin.Exec(ctx, `INSERT INTO switchyard.destinations
		(name, kind, address, retry_base_ms, retry_cap_ms, max_attempts, timeout_ms)
		VALUES ($1, 'jetstream', $2, 100, 30000, 10000, 2000)`, jetstreamDestination, jetstreamPrefix); err != nil {
		n.close()
		return nil, fmt.Errorf("add the jetstream destination: %w", err)
	}
	return n, nil
}

func (n *natsServer) url() string { return n.srv.ClientURL() }

// deliveries reads every message the stream stored, in stream order: each
// one a delivery the stream accepted (a publish it dropped as a duplicate
// within its window is not stored, and was acknowledged as one).
func (n *natsServer) deliveries(ctx context.Context) ([]delivery, error) {
	info, err := n.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream info: %w", err)
	}
	var out []delivery
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := n.stream.GetMsg(ctx, seq)
		if errors.Is(err, natsjs.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read stream message %d: %w", seq, err)
		}
		var p struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(m.Data, &p) // not ours: an unexpected delivery
		out = append(out, delivery{Key: m.Header.Get(nats.MsgIdHdr), ID: p.ID, Order: int64(seq), Accepted: true})
	}
	return out, nil
}

func (n *natsServer) close() {
	if n.conn != nil {
		n.conn.Close()
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
}
