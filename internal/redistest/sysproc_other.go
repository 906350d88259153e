//go:build !linux

package redistest

import "os/exec"

// setPdeathsig does nothing outside Linux: Stop and Main end the servers.
func setPdeathsig(*exec.Cmd) {}
