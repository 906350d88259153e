package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
