//go:build !linux

package sandbox

import (
	"syscall"
	"time"
)

// Outside Linux there are no namespaces, so no bubblewrap: mode auto
// refuses at New (bwrap is not found) and mode none runs commands in a
// process group.

func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

func pidfdOpen(int) int { return -1 }

func pidfdKill(int) {}

func pidfdWait(int, time.Duration) {}
