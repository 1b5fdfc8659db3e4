package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/switchyard/switchyard/internal/auth"
)

// readPassword reads a new password for account name: the first line of
// in, or, when in is a terminal, typed twice without echo.
func readPassword(in io.Reader, out io.Writer, name string) (string, error) {
	f, ok := in.(*os.File)
	if ok && isTerminal(f) {
		first, err := promptHidden(f, out, fmt.Sprintf("New password for %s (12 characters or more): ", name))
		if err != nil {
			return "", err
		}
		second, err := promptHidden(f, out, "Again: ")
		if err != nil {
			return "", err
		}
		if first != second {
			return "", errors.New("the two passwords differ")
		}
		return first, auth.CheckPassword(first)
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return "", errors.New("no password on stdin: pipe it in (first line) or run on a terminal to be asked")
	}
	return password, auth.CheckPassword(password)
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// promptHidden writes prompt and reads one line from the terminal f with
// echo turned off, restoring the terminal afterwards.
func promptHidden(f *os.File, out io.Writer, prompt string) (string, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", fmt.Errorf("read terminal settings: %w", err)
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", fmt.Errorf("turn off echo: %w", err)
	}
	defer func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }()
	fmt.Fprint(out, prompt)
	line, err := bufio.NewReader(f).ReadString('\n')
	fmt.Fprintln(out)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the password: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}
