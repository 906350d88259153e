// Package redistest starts real redis-server processes on free loopback ports for tests.
package redistest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTimeout bounds how long a server has to answer PING after it is launched.
	startTimeout = 5 * time.Second
	// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
	stopGrace = 2 * time.Second
	// killTimeout bounds the wait for a process to exit after SIGKILL.
	killTimeout = 5 * time.Second
	// portAttempts is how many free ports Start tries before it gives up.
	portAttempts = 5
)

// Server is a redis-server process on a free loopback port, owned by a test binary.
//
// Start gives a test a server of its own, which it may pause, kill and restart;
// Shared gives every test in the binary one server, kept apart by Prefix.
// The server keeps nothing on disk: a restart loses every key and script.
// Its methods are safe for concurrent use.
type Server struct {
	bin      string
	args     []string    // extra command-line arguments, kept for Restart
	dir      string      // working directory: log file, anything redis-server writes
	port     int         // fixed once start returns
	password string      // value of --requirepass, if given; used by Client and the probe
	tls      *tls.Config // set for a TLS-only server: how Client and the probe connect
	conf     string      // a config file to start with, if any (Sentinel keeps its state there)

	mu      sync.Mutex
	proc    *process // nil while not running
	stopped bool
}

// process is one run of redis-server; Restart makes a new one on the same port.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// Start starts a new redis-server on a free loopback port and returns when it
// answers PING. args are appended to the command line, for example
// "--requirepass", "secret". The server is stopped and its directory removed
// when tb and its subtests finish. Start fails tb if redis-server cannot be
// found or does not come up within about five seconds.
//
// The binary is $REDIS_SERVER if set, else redis-server from PATH, else
// /usr/bin/redis-server or /usr/sbin/redis-server.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s, err := start(args)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// start launches a server that no test owns; the caller arranges for Stop.
func start(args []string) (*Server, error) { return startWith(args, nil) }

// startWith is start with a setup step that runs once the server's directory
// exists and before the first launch: it may write files there, add to s.args
// and set s.tls.
func startWith(args []string, setup func(s *Server) error) (*Server, error) {
	bin, err := findBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("make server directory: %w", err)
	}
	s := &Server{
		bin:      bin,
		args:     slices.Clone(args),
		dir:      dir,
		password: passwordFrom(args),
	}
	if setup != nil {
		if err := setup(s); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Between freePort closing its listener and redis-server binding, another
	// process may take the port: try a few before giving up.
	for attempt := 1; ; attempt++ {
		s.port, err = freePort()
		if err == nil {
			err = s.launch()
		}
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == portAttempts {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

// launch runs redis-server on s.port and waits until it answers PING.
// On failure the process is gone and the error carries the tail of its log.
// s.mu must be held.
func (s *Server) launch() error {
	logPath := filepath.Join(s.dir, "redis.log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	// The log is shared by every run of this server; remember where this run starts.
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logFile.Close()
		return fmt.Errorf("open server log: %w", err)
	}

	args := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	if s.conf != "" { // a config file must come first (Sentinel keeps its state in it)
		args = append([]string{s.conf}, args...)
	}
	args = append(args,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
	)
	cmd := exec.Command(s.bin, append(args, s.args...)...)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setPdeathsig(cmd)
	err = cmd.Start()
	_ = logFile.Close() // the child has its own copy
	if err != nil {
		return fmt.Errorf("run %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()

	if err := s.waitReady(p, logPath, logStart); err != nil {
		_ = p.kill()
		return fmt.Errorf("redis-server on %s did not come up: %w\n%s", s.addr(), err, logTail(logPath, logStart))
	}
	s.proc = p
	return nil
}

// waitReady polls the server with PING until it answers, exits, or startTimeout passes.
func (s *Server) waitReady(p *process, logPath string, logStart int64) error {
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-p.done:
			if bindFailed(logPath, logStart) {
				return fmt.Errorf("%w: %v", errPortInUse, p.cmd.ProcessState)
			}
			return fmt.Errorf("exited at start: %v", p.cmd.ProcessState)
		default:
		}
		err := probeWith(s.addr(), s.password, p.cmd.Process.Pid, s.tls)
		if err == nil || errors.Is(err, errPortInUse) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %w", startTimeout, err)
		}
		select {
		case <-p.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.addr() }

func (s *Server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns the server's address as a URL for database 0, "redis://127.0.0.1:PORT/0".
// It carries no password.
func (s *Server) URL() string { return "redis://" + s.addr() + "/0" }

// Client returns a new go-redis client for the server, with ContextTimeoutEnabled
// so that a context's deadline bounds every call, and with the password given by
// --requirepass, if any; for a server from StartTLS, over TLS. The client is
// closed when tb finishes.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := s.newClient()
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// newClient returns a client as Client does, which the caller must close.
func (s *Server) newClient() *redis.Client {
	opt := &redis.Options{
		Addr:                  s.addr(),
		Password:              s.password,
		ContextTimeoutEnabled: true,
	}
	if s.tls != nil {
		opt.TLSConfig = s.tls.Clone()
	}
	return redis.NewClient(opt)
}

// Pid is the server's process id, or 0 if it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// running reports whether the server's process is up (neither killed nor stopped).
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Pause freezes the server with SIGSTOP: connections stay open and calls hang
// until Resume. Stop still ends a paused server.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGSTOP)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGCONT)
}

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if err := s.Signal(sig); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}

// Signal sends sig to the server's process, for a program rather than a
// test (Pause and Resume are the tests' forms of SIGSTOP and SIGCONT).
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return fmt.Errorf("send %v to %s: server is not running", sig, s.addr())
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("send %v to %s: %w", sig, s.addr(), err)
	}
	return nil
}

// Kill ends the server with SIGKILL and returns once it has exited.
// Restart brings it back.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		tb.Fatalf("redistest: kill %s: server is not running", s.addr())
	}
	err := s.proc.kill()
	s.proc = nil
	if err != nil {
		tb.Fatalf("redistest: kill %s: %v", s.addr(), err)
	}
}

// Restart starts the server again on the same port, killing it first if it is
// still running, and returns when it answers PING. The new process starts
// empty: keys and the script cache are gone. Restart fails tb after Stop.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.Relaunch(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}

// Relaunch is Restart for a program rather than a test: it returns an error
// instead of failing one.
func (s *Server) Relaunch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return fmt.Errorf("restart %s: server was stopped", s.addr())
	}
	if s.proc != nil {
		err := s.proc.kill()
		s.proc = nil
		if err != nil {
			return fmt.Errorf("restart %s: %w", s.addr(), err)
		}
	}
	// The port is ours to reuse, but give a lingering holder a moment to let go.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.launch()
		if err == nil {
			return nil
		}
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			return fmt.Errorf("restart: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends the server, with SIGTERM and then SIGKILL if it has not exited
// within two seconds, and removes its directory. It may be called more than
// once; Start registers it with tb.Cleanup.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
	_ = os.RemoveAll(s.dir)
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() error {
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // fails only if it has already exited
	select {
	case <-p.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("pid %d still running %v after SIGKILL", p.cmd.Process.Pid, killTimeout)
	}
}

// stop sends SIGTERM, and SIGKILL if the process outlives stopGrace.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process acts on SIGTERM only once continued
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.kill()
	}
}

// findBinary returns the redis-server to run.
func findBinary() (string, error) {
	if name := os.Getenv("REDIS_SERVER"); name != "" {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("REDIS_SERVER=%q: %w", name, err)
		}
		return path, nil
	}
	for _, name := range []string{"redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", errors.New("redis-server not found in PATH, /usr/bin or /usr/sbin: " +
		"install it (Debian: apt-get install redis-server; scripts/test does this for you) " +
		"or set REDIS_SERVER to its path")
}

// freePort returns a loopback port that was free a moment ago. It never
// returns 6379, which belongs to the machine's own Redis.
func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		if port != 6379 {
			return port, nil
		}
	}
}

// passwordFrom returns the value of "--requirepass" in args, or "".
func passwordFrom(args []string) string {
	var password string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--requirepass" {
			password = args[i+1] // the last one wins, as in redis-server
		}
	}
	return password
}

// Launch starts a redis-server, as Start does, for a program rather than a
// test (the load command, examples): the caller must Stop it.
func Launch(args ...string) (*Server, error) { return start(args) }
