package sandbox

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procAttr starts a process in its own group, as cred when set, killed
// when the worker dies.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
}

// pidfdOpen returns a pidfd of pid, -1 when none can be had.
func pidfdOpen(pid int) int {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1
	}
	return fd
}

// pidfdKill sends SIGKILL to the process of fd.
func pidfdKill(fd int) { _ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) }

// pidfdWait waits, at most for max, until the process of fd has exited
// (its pidfd is readable), and closes fd.
func pidfdWait(fd int, max time.Duration) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		if n, err := unix.Poll(fds, 1000); n > 0 || (err != nil && err != unix.EINTR) {
			break
		}
	}
	_ = unix.Close(fd)
}
