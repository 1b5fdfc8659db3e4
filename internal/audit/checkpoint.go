package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Checkpoint is the trail's head as it was at a moment, kept outside the
// database: one JSON object per line in an append-only file.
type Checkpoint struct {
	At   time.Time `json:"at"`
	ID   int64     `json:"id"`   // the newest row
	Rows int64     `json:"rows"` // rows in the trail up to and including ID
	Hash string    `json:"hash"` // the newest row's hash, hex
	// Keyed: written with a sealing key; MAC (hex) is then an HMAC of
	// ID, Rows and Hash under it, so that a line added to the file by
	// someone without the key does not verify.
	Keyed bool   `json:"keyed"`
	MAC   string `json:"mac,omitempty"`
}

func checkpointMAC(key []byte, id, rows int64, hash []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("switchyard audit checkpoint v1\x00"))
	_ = binary.Write(m, binary.BigEndian, id)
	_ = binary.Write(m, binary.BigEndian, rows)
	m.Write(hash)
	return m.Sum(nil)
}

func newCheckpoint(key []byte, id, rows int64, hash []byte, at time.Time) Checkpoint {
	cp := Checkpoint{At: at.UTC().Truncate(time.Second), ID: id, Rows: rows, Hash: hex.EncodeToString(hash)}
	if key != nil {
		cp.Keyed, cp.MAC = true, hex.EncodeToString(checkpointMAC(key, id, rows, hash))
	}
	return cp
}

// AppendCheckpoint appends cp to the file at path (created 0600, with its
// directory, if missing) and syncs it.
func AppendCheckpoint(path string, cp Checkpoint) error {
	line, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("audit: checkpoint directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open checkpoint file: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit: write checkpoint: %w", err)
	}
	return nil
}

// ErrNoCheckpoint: the checkpoint file does not exist or holds none.
var ErrNoCheckpoint = errors.New("audit: no checkpoint")

// tailBytes is how much of the file's end LastCheckpoint reads: far more
// than one line.
const tailBytes = 64 << 10

// LastCheckpoint reads the last complete line of the checkpoint file at
// path.
func LastCheckpoint(path string) (Checkpoint, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Checkpoint{}, ErrNoCheckpoint
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: open checkpoint file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: read checkpoint file: %w", err)
	}
	start := max(0, info.Size()-tailBytes)
	tail, err := io.ReadAll(io.NewSectionReader(f, start, info.Size()-start))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: read checkpoint file: %w", err)
	}
	// A line cut by a crash mid-write has no newline: skip it.
	tail = bytes.TrimRight(tail[:bytes.LastIndexByte(tail, '\n')+1], "\n")
	if len(tail) == 0 {
		return Checkpoint{}, ErrNoCheckpoint
	}
	var cp Checkpoint
	if err := json.Unmarshal(tail[bytes.LastIndexByte(tail, '\n')+1:], &cp); err != nil {
		return Checkpoint{}, fmt.Errorf("audit: last checkpoint does not parse: %w", err)
	}
	return cp, nil
}
