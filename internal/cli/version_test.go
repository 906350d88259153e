package cli

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestVersionOf(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/sluicehq/sluice", Version: "v0.3.0"}}
	assert.Equal(t, "worker v0.3.0 go1.26.0", versionOf("worker", info))

	info.Main.Version = ""
	info.Settings = []debug.BuildSetting{
		{Key: "vcs.revision", Value: "4308d90abc"}, {Key: "vcs.time", Value: "2026-11-24T17:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}
	assert.Equal(t, "enqueue (devel) revision 4308d90abc+dirty 2026-11-24T17:00:00Z go1.26.0", versionOf("enqueue", info))
}

func TestVersionOfThisBinary(t *testing.T) {
	v := Version("x")
	assert.True(t, strings.HasPrefix(v, "x "), v)
	assert.Contains(t, v, "go1.", "the Go version")
}
