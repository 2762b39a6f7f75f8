package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// promptPassword asks on the terminal with echo off. It reads /dev/tty, not
// stdin, so a password never comes from a pipe by accident: that is what
// --password-stdin says on purpose.
func promptPassword(w io.Writer, prompt string) (string, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return "", errors.New("no terminal to ask for a password on; use --password-stdin")
	}
	defer tty.Close()
	fd := tty.Fd()
	var old syscall.Termios
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCGETS, uintptr(unsafe.Pointer(&old))); e != 0 {
		return "", errors.New("no terminal to ask for a password on; use --password-stdin")
	}
	noEcho := old
	noEcho.Lflag &^= syscall.ECHO
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCSETS, uintptr(unsafe.Pointer(&noEcho))); e != 0 {
		return "", fmt.Errorf("turn terminal echo off: %v", e)
	}
	defer syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TCSETS, uintptr(unsafe.Pointer(&old)))
	fmt.Fprint(w, prompt)
	line, err := bufio.NewReader(tty).ReadString('\n')
	fmt.Fprintln(w)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
