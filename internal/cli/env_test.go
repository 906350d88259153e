package cli

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type many []string

func (m *many) String() string     { return strings.Join(*m, " ") }
func (m *many) Set(v string) error { *m = append(*m, v); return nil }
func (m *many) Repeatable()        {}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"SLUICE_LIMITER_REDIS": "redis://env:6379/1",
		"SLUICE_CONCURRENCY":   "7",
		"SLUICE_REDIS":         "redis://env:6379/0",
		"SLUICE_LIMIT":         "a=1/s;b=2/s\nc=3/s",
		"SLUICE_HELP":          "true",
		"SLUICE_QUEUES":        "  ",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		redisURL, limiter, queues string
		concurrency               int
		help                      bool
		limits                    many
	)
	fs.StringVar(&redisURL, "redis", "", "")
	fs.StringVar(&limiter, "limiter-redis", "", "")
	fs.StringVar(&queues, "queues", "default", "")
	fs.IntVar(&concurrency, "concurrency", 10, "")
	fs.BoolVar(&help, "help", false, "")
	fs.Var(&limits, "limit", "")
	require.NoError(t, fs.Parse([]string{"--redis", "redis://flag:6379/0"}))
	require.NoError(t, fromEnv(fs, lookup, "help"))

	assert.Equal(t, "redis://flag:6379/0", redisURL, "the flag wins")
	assert.Equal(t, "redis://env:6379/1", limiter)
	assert.Equal(t, 7, concurrency)
	assert.Equal(t, many{"a=1/s", "b=2/s", "c=3/s"}, limits, "a repeatable flag's values")
	assert.False(t, help, "skipped")
	assert.Equal(t, "default", queues, "a blank variable is unset")
}

func TestFromEnvBadValue(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("concurrency", 10, "")
	require.NoError(t, fs.Parse(nil))
	err := fromEnv(fs, func(string) (string, bool) { return "lots", true })
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrUsage)
	assert.Contains(t, err.Error(), `SLUICE_CONCURRENCY="lots": `)
}
