package ws

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
)

// socketBufferSize is the size of each of a socket's read and write
// buffers: a frame header and a typical message (an item's state, an
// answer, a mutation); a longer message is read or written past the
// buffer, in more than one system call.
const socketBufferSize = 1 << 10

// smallBuffers wraps w so that the connection websocket.Accept hijacks
// comes with buffers of socketBufferSize instead of the HTTP server's
// 4 KiB each: a socket holds its buffers for as long as it lives, and an
// idle one (most of them, most of the time) uses neither.
func smallBuffers(w http.ResponseWriter) http.ResponseWriter {
	return smallBufferWriter{w}
}

type smallBufferWriter struct{ http.ResponseWriter }

// Hijack hijacks the connection and hands it out with small buffers. The
// bytes the HTTP server had read past the request (a client may send
// right behind the upgrade, before its answer) are handed out buffered,
// as the HTTP server's reader holds them: websocket.Accept takes what is
// buffered and reads the connection after it (resetting the reader's
// source, so they could not wait in it). More than our buffer holds
// keeps the HTTP server's buffers.
func (w smallBufferWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	early := brw.Reader.Buffered()
	if early > socketBufferSize {
		return conn, brw, nil
	}
	if err := brw.Writer.Flush(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	var r io.Reader = conn
	if early > 0 {
		b, _ := brw.Reader.Peek(early)
		r = io.MultiReader(bytes.NewReader(bytes.Clone(b)), conn)
	}
	br := bufio.NewReaderSize(r, socketBufferSize)
	if early > 0 {
		// One read of the first reader: the early bytes, without waiting
		// on the connection.
		if _, err := br.Peek(early); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	return conn, bufio.NewReadWriter(br, bufio.NewWriterSize(conn, socketBufferSize)), nil
}

// Unwrap lets http.ResponseController reach the response (deadlines).
func (w smallBufferWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
