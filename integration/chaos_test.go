package integration

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The short chaos run of the suite: seed chaosSeed, chaosDuration of faults
// (a couple of seconds apart, so that a dozen land), then up to chaosDrain
// for the queue to empty. docs/reliability.md has the long run.
const (
	chaosSeed     = "24"
	chaosDuration = 30 * time.Second
	chaosDrain    = 15 * time.Second
)

// TestChaosShort runs the chaos command (cmd/chaos) for about 50 s: three
// built workers with every feature on, against a Redis it starts itself and
// an upstream that refuses and announces, while it kills workers, pauses,
// restarts and flushes Redis, kills pub/sub connections, storms the
// upstream, and lowers, raises and cools down limits. The command checks
// that no job was lost, none ran more often than at-least-once allows, no
// bucket granted beyond its limit, no in-flight bound or pause was broken,
// and none was archived; it exits 1 if any did not hold, and its report
// says which.
func TestChaosShort(t *testing.T) {
	t.Parallel()
	chaos := filepath.Join(t.TempDir(), "chaos")
	if out, err := exec.Command("go", "build", "-o", chaos, "github.com/sluicehq/sluice/cmd/chaos").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/chaos: %v\n%s", err, out)
	}
	code, out := runCommand(t, chaosDuration+chaosDrain+90*time.Second, chaos,
		"--seed", chaosSeed, "--duration", chaosDuration.String(), "--drain", chaosDrain.String(),
		"--workers", "3", "--fault-gap", "2s", "--bin", filepath.Dir(bin.worker))
	if code != 0 {
		t.Fatalf("chaos --seed %s: exit status %d\n%s", chaosSeed, code, out)
	}
	t.Logf("chaos --seed %s:\n%s", chaosSeed, out)
}
