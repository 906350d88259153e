package redistest

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill the server when the test binary dies, so a
// crashed or timed-out test leaves no redis-server behind. (Strictly, when the
// thread that started it exits; Go keeps its threads unless a goroutine exits
// while locked to one.)
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
