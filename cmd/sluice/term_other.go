//go:build !linux

package main

import (
	"errors"
	"io"
)

// promptPassword has no terminal control off Linux; --password-stdin works
// everywhere.
func promptPassword(io.Writer, string) (string, error) {
	return "", errors.New("asking for a password on the terminal works on Linux only; use --password-stdin")
}
