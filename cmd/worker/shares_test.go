package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/throttle"
)

// The status line names a key's priority when it is not the default: a key
// with jobs of two priorities has a share at each (docs/priorities.md).
func TestDescribeTenants(t *testing.T) {
	got := describeTenants([]throttle.TenantShare{
		{Tenant: "tenant:a", Priority: 1, Share: 0.95, Waiting: 2},
		{Tenant: "tenant:a", Priority: 3, Share: 0.05},
	}, 3)
	assert.Equal(t, "3 keys sharing: tenant:a p1 95% 2 waiting, tenant:a 5%, 1 more", got)
}
