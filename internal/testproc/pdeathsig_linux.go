package testproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startWithParent starts cmd so that the kernel kills it when the test binary dies,
// however it dies: a test binary killed from outside (a `timeout`, a CI job cancelled, a
// SIGKILL) runs no cleanup, and its `sluice serve` children used to keep running, holding
// ports and CPU for hours.
//
// Linux delivers the parent-death signal when the thread that forked the child exits, not
// the process: the start happens on a locked thread, which Go keeps after the unlock
// (only a goroutine that exits while locked takes its thread with it), so the signal
// comes when the process ends. A goroutine that locks a thread and exits without unlocking
// would end its thread, and any child started on it: nothing in this module does (grep
// LockOSThread before adding one to a test).
func startWithParent(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return cmd.Start()
}
