package integration

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// bin holds the paths of the commands TestMain builds.
var bin struct {
	worker  string
	enqueue string
	sluice  string
}

// TestMain builds cmd/worker, cmd/enqueue and cmd/sluice once into a temporary directory,
// runs the tests, and removes the directory. Every test starts its own
// redis-server processes (never the machine's own Redis), so there is no
// shared server to stop; each test's processes end in its Cleanup, and
// Pdeathsig ends them if this binary dies first.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse() // for testing.Verbose and -soak, before m.Run would parse them
	dir, err := os.MkdirTemp("", "sluice-integration-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: make a directory for the binaries: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	bin.worker = filepath.Join(dir, "worker")
	bin.enqueue = filepath.Join(dir, "enqueue")
	bin.sluice = filepath.Join(dir, "sluice")
	for _, b := range []struct{ out, pkg string }{
		{bin.worker, "github.com/sluicehq/sluice/cmd/worker"},
		{bin.enqueue, "github.com/sluicehq/sluice/cmd/enqueue"},
		{bin.sluice, "github.com/sluicehq/sluice/cmd/sluice"},
	} {
		if err := build(b.out, b.pkg); err != nil {
			fmt.Fprintf(os.Stderr, "integration: cannot build %s, so no test ran:\n%v\n", b.pkg, err)
			return 1
		}
	}
	return m.Run()
}

// build compiles pkg to out. The binaries are built without -race even when
// the tests run with it: the race detector would slow the workers several
// times over and skew the timing the acceptance tests measure; the packages
// they are built from have race-enabled tests of their own.
func build(out, pkg string) error {
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build -o %s %s: %v\n%s", out, pkg, err, b)
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "integration: built %s in %v\n", pkg, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
