package main

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/internal/redistest"
)

// pinApart puts redis-server's main thread on the last CPU and every thread
// of this process on the others; undo gives both back what they had.
func TestPinApart(t *testing.T) {
	var all unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &all))
	if all.Count() < 2 {
		t.Skip("one CPU: nothing to pin apart")
	}
	srv, err := redistest.Launch()
	require.NoError(t, err)
	defer srv.Stop()
	pid := srv.Pid()
	require.NotZero(t, pid)

	undo, err := pinApart(pid)
	if errors.Is(err, unix.EPERM) {
		t.Skip("this machine does not let a process set CPU masks:", err)
	}
	require.NoError(t, err)
	var theirs unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(pid, &theirs))
	assert.Equal(t, 1, theirs.Count(), "redis-server on one CPU")
	for _, tid := range threads(t) {
		var ours unix.CPUSet
		if unix.SchedGetaffinity(tid, &ours) != nil {
			continue // exited since the listing
		}
		assert.Equal(t, all.Count()-1, ours.Count(), "thread %d", tid)
		for c := range 1024 {
			if theirs.IsSet(c) {
				assert.False(t, ours.IsSet(c), "thread %d shares redis-server's CPU %d", tid, c)
			}
		}
	}

	undo()
	require.NoError(t, unix.SchedGetaffinity(pid, &theirs))
	assert.Equal(t, all, theirs, "redis-server's mask back")
	for _, tid := range threads(t) {
		var ours unix.CPUSet
		if unix.SchedGetaffinity(tid, &ours) == nil {
			assert.Equal(t, all, ours, "thread %d's mask back", tid)
		}
	}
}

// threads lists this process's thread ids.
func threads(t *testing.T) []int {
	tasks, err := os.ReadDir("/proc/self/task")
	require.NoError(t, err)
	var tids []int
	for _, e := range tasks {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}
