package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// A rediss:// URL talks TLS and verifies the server's certificate.
func TestRedissURL(t *testing.T) {
	srv := redistest.StartTLS(t, "--requirepass", "hunter2")
	opt, aopt, err := RedisFromURL(srv.URL("", "hunter2"))
	require.NoError(t, err)
	require.NotNil(t, opt.TLSConfig)

	// The test CA is not among the system's roots: verification fails, readably.
	err = Ping(context.Background(), opt)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "cannot reach Redis at "+srv.Addr()+": "), err.Error())
	assert.Contains(t, err.Error(), "certificate")
	assert.NotContains(t, err.Error(), "hunter2")

	// Trusting the test CA, both clients get through. Fresh options: go-redis
	// may still be dialling in the background with the first ones.
	opt, aopt, err = RedisFromURL(srv.URL("", "hunter2"))
	require.NoError(t, err)
	opt.TLSConfig.RootCAs = srv.TLSConfig().RootCAs
	require.NoError(t, Ping(context.Background(), opt))

	aopt.TLSConfig.RootCAs = srv.TLSConfig().RootCAs
	ac := asynq.NewClient(aopt)
	defer ac.Close()
	assert.NoError(t, ac.Ping())
}
