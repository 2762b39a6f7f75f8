//go:build !linux

package testproc

import "os/exec"

// startWithParent starts cmd; only Linux can tie a child's life to its parent's.
func startWithParent(cmd *exec.Cmd) error { return cmd.Start() }
