package redistest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

func TestCluster(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := redistest.StartCluster(t, 3, 0)
	t.Logf("3-node cluster up in %v", time.Since(began))
	require.Len(t, c.Addrs(), 3)

	rdb := c.Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	masters := make(map[string]int)
	for i := range 30 {
		key := prefix + "{" + strconv.Itoa(i) + "}"
		require.NoError(t, rdb.Set(ctx, key, i, time.Minute).Err(), "key %d", i)

		m := c.Master(t, key)
		masters[m.Addr()]++
		direct := m.Client(t)
		got, err := direct.Get(ctx, key).Int()
		require.NoError(t, err, "key %d: its master has it", i)
		assert.Equal(t, i, got, "key %d", i)
	}
	assert.Len(t, masters, 3, "30 keys spread over every master: %v", masters)
}

func TestClusterOfOneMaster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 1, 0)
	require.Len(t, c.Addrs(), 1)
	rdb := c.Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	for i := range 10 {
		key := prefix + "{" + strconv.Itoa(i) + "}"
		require.NoError(t, rdb.Set(ctx, key, i, time.Minute).Err(), "key %d", i)
		assert.Equal(t, c.Addrs()[0], c.Master(t, key).Addr(), "key %d: the one master serves every slot", i)
	}
}
