package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinApart puts the main thread of process pid (redis-server runs its
// commands there) on the last CPU and every thread of this process on the
// others, so that no run of this process preempts the server mid-script
// and a script's time in INFO commandstats is the script's. Threads made
// later inherit the mask of the thread that made them. undo gives both their
// masks back. With one CPU, or a pid of 0, it does nothing.
func pinApart(pid int) (undo func(), err error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return nil, fmt.Errorf("reading this process's CPU mask: %w", err)
	}
	if pid == 0 || all.Count() < 2 {
		return func() {}, nil
	}
	last := -1
	for c := range 1024 {
		if all.IsSet(c) {
			last = c
		}
	}
	var server, rest unix.CPUSet
	server.Set(last)
	rest = all
	rest.Clear(last)
	var theirs unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &theirs); err != nil {
		return nil, fmt.Errorf("reading redis-server's CPU mask: %w", err)
	}
	if err := unix.SchedSetaffinity(pid, &server); err != nil {
		return nil, fmt.Errorf("pinning redis-server: %w", err)
	}
	undo = func() {
		_ = unix.SchedSetaffinity(pid, &theirs)
		_ = setThreads(&all)
	}
	if err := setThreads(&rest); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// setThreads sets the CPU mask of every thread of this process.
func setThreads(set *unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("listing this process's threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread may have exited since the listing: not an error.
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pinning thread %d: %w", tid, err)
		}
	}
	return nil
}
