package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// binaries are the paths of the built commands the run drives.
type binaries struct {
	worker, sluice string
}

// buildBinaries builds cmd/worker and cmd/sluice into dir, or, if from is
// set, takes them from there.
func buildBinaries(dir, from string) (binaries, error) {
	if from != "" {
		b := binaries{worker: filepath.Join(from, "worker"), sluice: filepath.Join(from, "sluice")}
		for _, p := range []string{b.worker, b.sluice} {
			if _, err := os.Stat(p); err != nil {
				return b, fmt.Errorf("--bin: %w", err)
			}
		}
		return b, nil
	}
	b := binaries{worker: filepath.Join(dir, "worker"), sluice: filepath.Join(dir, "sluice")}
	for _, x := range []struct{ out, pkg string }{
		{b.worker, "github.com/sluicehq/sluice/cmd/worker"},
		{b.sluice, "github.com/sluicehq/sluice/cmd/sluice"},
	} {
		out, err := exec.Command("go", "build", "-o", x.out, x.pkg).CombinedOutput()
		if err != nil {
			return b, fmt.Errorf("go build %s (run the chaos command from the sluice module, or give --bin): %v\n%s", x.pkg, err, out)
		}
	}
	return b, nil
}

// worker is one worker of the fleet: its arguments, and its current
// process, which a kill ends and a restart replaces. Its output, every
// process's in turn, goes to one log file.
type worker struct {
	name string
	bin  string
	args []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
	gen  int           // processes started
}

// start starts a new process for w; w.mu is held.
func (w *worker) start() error {
	f, err := os.OpenFile(w.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	w.gen++
	fmt.Fprintf(f, "---- chaos: %s process %d starts at %s ----\n", w.name, w.gen, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(w.bin, w.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", w.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	w.cmd, w.done = cmd, done
	return nil
}

// Start starts the worker's first process.
func (w *worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.start()
}

// Pid is the running process's id, 0 if none runs.
func (w *worker) Pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil || exited(w.done) {
		return 0
	}
	return w.cmd.Process.Pid
}

// Kill freezes the process with SIGSTOP, calls seen (which looks at its
// connections while it can open no other), then ends it with SIGKILL and
// waits for it to exit. It returns the process's id and when it died.
func (w *worker) Kill(seen func(pid int)) (pid int, at time.Time, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil || exited(w.done) {
		return 0, time.Time{}, fmt.Errorf("%s is not running", w.name)
	}
	pid = w.cmd.Process.Pid
	_ = w.cmd.Process.Signal(syscall.SIGSTOP)
	seen(pid)
	at = time.Now()
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		return pid, at, fmt.Errorf("%s (pid %d) still running 10s after SIGKILL", w.name, pid)
	}
	w.cmd = nil
	return pid, at, nil
}

// Restart starts a new process if none is running.
func (w *worker) Restart() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd != nil && !exited(w.done) {
		return nil
	}
	return w.start()
}

// Stop asks the process to stop with SIGTERM and waits up to grace, then
// kills it. It reports whether the process stopped by itself with status 0.
func (w *worker) Stop(grace time.Duration) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil || exited(w.done) {
		return false, fmt.Errorf("%s was not running", w.name)
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		return w.cmd.ProcessState.ExitCode() == 0, nil
	case <-time.After(grace):
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.done
		return false, fmt.Errorf("%s (pid %d) still running %v after SIGTERM: killed", w.name, w.cmd.Process.Pid, grace)
	}
}

func exited(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// environ is this process's environment without the variables a worker or
// the sluice command would read instead of their flags.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "REDIS_URL=") || strings.HasPrefix(kv, "SLUICE_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// sluiceCLI runs the built sluice command against the run's Redis.
type sluiceCLI struct {
	bin, redisURL, prefix string
}

// sluiceTimeout bounds one run of the sluice command; a Redis paused for a
// few seconds only delays it.
const sluiceTimeout = 20 * time.Second

// Run runs sluice with args and returns its output; a non-zero exit is an
// error carrying the output.
func (c sluiceCLI) Run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sluiceTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(args, "--redis", c.redisURL, "--key-prefix", c.prefix)...)
	cmd.Env = environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return text, fmt.Errorf("sluice %s: exit status %d: %s", args[0], ee.ExitCode(), text)
		}
		return text, fmt.Errorf("sluice %s: %w", args[0], err)
	}
	return text, nil
}
