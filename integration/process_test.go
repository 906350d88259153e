package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// tailBytes bounds how much of a process's output a failing test dumps.
	tailBytes = 6 << 10
	// killWait bounds the wait for a process to go after SIGKILL.
	killWait = 5 * time.Second
)

// process is a built binary started by a test, with its stdout and stderr in
// files under the test's temporary directory. It is killed, if still running,
// when the test ends, and the tails of its output are logged if the test failed.
type process struct {
	tb   testing.TB
	name string
	cmd  *exec.Cmd
	out  string // path of stdout
	err  string // path of stderr

	done  chan struct{} // closed once the process has exited and been reaped
	state *os.ProcessState
}

// startProcess starts path with args. env is added to the test's environment,
// from which REDIS_URL is removed so that no command falls back to a Redis
// the test did not start.
func startProcess(tb testing.TB, name, path string, args []string, env ...string) *process {
	tb.Helper()
	dir := tb.TempDir()
	p := &process{
		tb:   tb,
		name: name,
		out:  filepath.Join(dir, name+".stdout"),
		err:  filepath.Join(dir, name+".stderr"),
		done: make(chan struct{}),
	}
	stdout, err := os.Create(p.out)
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	stderr, err := os.Create(p.err)
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Stdout = stdout
	p.cmd.Stderr = stderr
	p.cmd.Env = append(environ(), env...)
	// The kernel kills the child if this test binary dies: a crashed or
	// timed-out run leaves no worker behind.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = p.cmd.Start()
	_ = stdout.Close() // the child has its own copies
	_ = stderr.Close()
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	tb.Cleanup(p.cleanup)
	return p
}

// environ is the test's environment without REDIS_URL.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") {
			env = append(env, kv)
		}
	}
	return env
}

// PID is the process id.
func (p *process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process; a process that has already exited is not an error.
func (p *process) Signal(sig syscall.Signal) {
	p.tb.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.tb.Fatalf("%s: send %v: %v", p.name, sig, err)
	}
}

// Exited reports whether the process has exited.
func (p *process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to timeout for the process to exit and returns its exit code
// (-1 if a signal ended it). It fails the test if the process is still running.
func (p *process) Wait(timeout time.Duration) int {
	p.tb.Helper()
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(timeout):
		p.tb.Fatalf("%s (pid %d) still running %v after it was asked to stop", p.name, p.PID(), timeout)
		return 0
	}
}

// Output is everything the process has written so far, stdout then stderr.
func (p *process) Output() string {
	return readFile(p.out) + readFile(p.err)
}

// cleanup kills the process if it is still running and, if the test failed,
// logs the end of its output.
func (p *process) cleanup() {
	if !p.Exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(killWait):
			p.tb.Errorf("%s (pid %d) still running %v after SIGKILL", p.name, p.PID(), killWait)
			return
		}
	}
	if dir := os.Getenv("SLUICE_IT_LOGS"); dir != "" {
		p.keep(dir)
	}
	if p.tb.Failed() {
		p.tb.Logf("---- %s (pid %d, %v): end of stdout ----\n%s", p.name, p.PID(), p.state, tail(readFile(p.out)))
		p.tb.Logf("---- %s (pid %d, %v): end of stderr ----\n%s", p.name, p.PID(), p.state, tail(readFile(p.err)))
	}
}

// keep copies the process's output to dir, named after the test and the
// process, for reading after the run: SLUICE_IT_LOGS=/tmp/logs go test ….
func (p *process) keep(dir string) {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(p.tb.Name()) + "." + p.name
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.tb.Logf("keep logs: %v", err)
		return
	}
	for _, f := range []struct{ src, ext string }{{p.out, ".stdout"}, {p.err, ".stderr"}} {
		if err := os.WriteFile(filepath.Join(dir, name+f.ext), []byte(readFile(f.src)), 0o644); err != nil {
			p.tb.Logf("keep logs: %v", err)
		}
	}
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}

// tail is the last tailBytes of s, from a line start.
func tail(s string) string {
	if len(s) <= tailBytes {
		return s
	}
	s = s[len(s)-tailBytes:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "[...]\n" + s
}

// runCommand runs path with args to the end, within timeout, and returns its
// exit code and combined output.
func runCommand(tb testing.TB, timeout time.Duration, path string, args ...string) (int, string) {
	tb.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = environ()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("run %s: %v", filepath.Base(path), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		tb.Fatalf("%s %s: still running after %v\n%s", filepath.Base(path), strings.Join(args, " "), timeout, out.String())
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// poll calls cond every interval until it returns true or timeout passes, and
// reports whether it returned true.
func poll(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}
