package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExitCode(t *testing.T) {
	assert.Equal(t, ExitOK, ExitCode(nil))
	assert.Equal(t, ExitFailure, ExitCode(errors.New("redis went away")))
	assert.Equal(t, ExitUsage, ExitCode(Usagef("--count %d is out of range", 0)))
	assert.Equal(t, ExitUsage, ExitCode(fmt.Errorf("flags: %w", Usagef("bad"))))

	cause := errors.New("cause")
	err := Usagef("payload: %w", cause)
	assert.Equal(t, "payload: cause", err.Error())
	assert.ErrorIs(t, err, cause)
	assert.ErrorIs(t, err, ErrUsage)
}

func TestReport(t *testing.T) {
	var buf bytes.Buffer
	assert.Equal(t, ExitUsage, Report(&buf, "enqueue", Usagef("--type is required")))
	assert.Equal(t, ExitFailure, Report(&buf, "enqueue", errors.New("cannot reach Redis at 127.0.0.1:1: connection refused")))
	assert.Equal(t, ExitOK, Report(&buf, "enqueue", nil))
	assert.Equal(t, "enqueue: --type is required\nenqueue: cannot reach Redis at 127.0.0.1:1: connection refused\n", buf.String())
}

// Fatalf exits, so it runs in a child process: the test binary again, told
// by the environment which call to make.
func TestFatalf(t *testing.T) {
	switch os.Getenv("CLI_TEST_FATALF") {
	case "usage":
		Fatalf("bad flag: %w", Usagef("--count 0 is out of range"))
	case "failure":
		Fatalf("enqueue failed after %d tasks: %v", 12, errors.New("connection reset"))
	case "":
	default:
		t.Fatal("unknown CLI_TEST_FATALF")
	}

	tests := []struct {
		mode   string
		code   int
		stderr string
	}{
		{"usage", ExitUsage, "bad flag: --count 0 is out of range\n"},
		{"failure", ExitFailure, "enqueue failed after 12 tasks: connection reset\n"},
	}
	for _, tt := range tests {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFatalf$")
		cmd.Env = append(os.Environ(), "CLI_TEST_FATALF="+tt.mode)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, tt.mode)
		assert.Equal(t, tt.code, exit.ExitCode(), tt.mode)
		assert.Equal(t, Prog()+": "+tt.stderr, stderr.String(), tt.mode)
	}
}

func TestReportClipsHugeArguments(t *testing.T) {
	var b strings.Builder
	huge := strings.Repeat("x", 100_000)
	Report(&b, "sluice", Usagef("unknown command %q: want limits", huge))
	assert.Equal(t, `sluice: unknown command "`+strings.Repeat("x", MaxEcho-1)+`…": want limits`+"\n", b.String())
	b.Reset()
	Report(&b, "sluice", fmt.Errorf("%s", strings.Repeat("a ", 50_000)))
	assert.LessOrEqual(t, len(b.String()), MaxMessage+len("sluice: …\n"))
	assert.Equal(t, "é…", clipTo("éé", 3), "cut at a character's boundary")
}
