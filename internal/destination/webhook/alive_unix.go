//go:build unix

package webhook

import (
	"syscall"
	"time"
)

// stillOpen reports whether the receiver has left c open and sent nothing
// on it since its last answer: a peek that does not wait finds nothing to
// read. A connection the receiver closed has an end of file to read
// (or a TLS close_notify before it); one it reset, an error.
func (c *conn) stillOpen() bool {
	sc, ok := c.tcp.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	// The last delivery's deadline may have passed: the raw read would
	// fail on it without looking.
	if err := c.tcp.SetReadDeadline(time.Time{}); err != nil {
		return false
	}
	open := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true // done, whatever it found: never wait
	})
	return err == nil && open
}
