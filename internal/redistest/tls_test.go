package redistest_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestStartTLS(t *testing.T) {
	t.Parallel()
	s := redistest.StartTLS(t, "--requirepass", "secret", "--user", "app", "on", ">pw", "~app:*", "+@all")
	ctx := context.Background()

	require.NoError(t, ping(s.Client(t), time.Second), "Client speaks TLS and knows the password")
	assert.Equal(t, "rediss://u:p%40ss@"+s.Addr()+"/0", s.URL("u", "p@ss"))
	assert.Equal(t, "rediss://"+s.Addr()+"/0", s.URL("", ""))

	opt, err := redis.ParseURL(s.URL("default", "secret"))
	require.NoError(t, err)
	require.NotNil(t, opt.TLSConfig, "rediss:// means TLS")
	opt.TLSConfig.RootCAs = s.TLSConfig().RootCAs
	byURL := redis.NewClient(opt)
	t.Cleanup(func() { _ = byURL.Close() })
	require.NoError(t, byURL.Set(ctx, "k", "v", time.Minute).Err(), "a client from URL and the CA")

	opt, err = redis.ParseURL(s.URL("app", "pw"))
	require.NoError(t, err)
	opt.TLSConfig = s.TLSConfig()
	app := redis.NewClient(opt)
	t.Cleanup(func() { _ = app.Close() })
	require.NoError(t, app.Set(ctx, "app:k", "v", time.Minute).Err(), "the ACL user from args")
	assert.True(t, redis.HasErrorPrefix(app.Set(ctx, "other:k", "v", time.Minute).Err(), "NOPERM"), "only its keys")

	// Without the CA the certificate is not trusted.
	untrusted := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "secret", TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}})
	t.Cleanup(func() { _ = untrusted.Close() })
	err = ping(untrusted, time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")

	// No plain TCP: a plain client gets nowhere.
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "secret", MaxRetries: -1})
	t.Cleanup(func() { _ = plain.Close() })
	assert.Error(t, ping(plain, time.Second), "plain TCP on the TLS port")

	s.Restart(t)
	assert.NoError(t, ping(s.Client(t), time.Second), "TLS again after Restart")
	_, err = net.DialTimeout("tcp", s.Addr(), time.Second)
	assert.NoError(t, err, "same port after Restart")
}
