// Package browsertest finds the headless browser the dashboard's tests run
// their page in: the Chromium that scripts/test installs from the OS
// packages, as it installs redis-server.
package browsertest

import (
	"os"
	"os/exec"
	"testing"
)

// Path returns the browser named by SLUICE_BROWSER (scripts/test sets it,
// so that a missing browser fails there instead of skipping), or the first of
// chromium, chromium-browser and google-chrome on PATH. Without any it skips
// tb: a plain go test on a machine without a browser runs the other tests.
func Path(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("SLUICE_BROWSER"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	tb.Skip("no headless browser: scripts/test installs chromium")
	return ""
}
