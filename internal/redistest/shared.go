package redistest

import (
	"os"
	"sync"
	"testing"
)

var (
	sharedOnce sync.Once
	sharedSrv  *Server
	sharedErr  error
)

// Shared returns the test binary's shared server, starting it on first use.
// Tests, parallel ones included, share it and keep apart with Prefix; they
// must not Pause, Kill, Restart or Stop it, nor flush it: use Start for that.
// The server outlives the test that started it; Main stops it. If it cannot
// start, Shared fails this and every later caller with the same error.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedOnce.Do(func() { sharedSrv, sharedErr = start(nil) })
	if sharedErr != nil {
		tb.Fatalf("redistest: shared server: %v", sharedErr)
	}
	return sharedSrv
}

// Main runs the tests, stops the shared server if one was started, and exits
// with the tests' code. Call it from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	// Do waits for a start still in progress and marks the Once done, so no
	// shared server can start after this point.
	sharedOnce.Do(func() {})
	if sharedSrv != nil {
		sharedSrv.Stop()
	}
	os.Exit(code)
}
