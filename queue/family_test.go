package queue_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/queue"
)

func TestMember(t *testing.T) {
	t.Parallel()
	for i, c := range []struct {
		p, lane  int
		want     string
		wantP    int
		wantLane int
	}{
		{0, 0, "mail", 3, 0}, // no priority, no key: where it always went
		{3, 0, "mail", 3, 0},
		{1, 0, "mail:p1", 1, 0},
		{5, 0, "mail:p5", 5, 0},
		{3, 1, "mail:p3:l1", 3, 1},
		{1, 3, "mail:p1:l3", 1, 3},
		{9, 0, "mail:p5", 5, 0},               // out of range: the nearest
		{-1, queue.Lanes, "mail:p1:l3", 1, 3}, // likewise
	} {
		got := queue.Member("mail", c.p, c.lane)
		assert.Equal(t, c.want, got, "step %d", i)
		base, p, lane, ok := queue.ParseMember(got)
		assert.Equal(t, "mail", base, "step %d", i)
		assert.Equal(t, c.wantP, p, "step %d", i)
		assert.Equal(t, c.wantLane, lane, "step %d", i)
		assert.Equal(t, got != "mail", ok, "step %d", i)
	}
}

func TestFamily(t *testing.T) {
	t.Parallel()
	fam := queue.Family("default")
	assert.Len(t, fam, 5*queue.Lanes)
	assert.Equal(t, "default:p1", fam[0], "highest priority first")
	assert.Contains(t, fam, "default", "the queue itself is priority 3, lane 0")
	seen := map[string]bool{}
	for _, q := range fam {
		assert.False(t, seen[q], "%s twice", q)
		seen[q] = true
		base, _, _, _ := queue.ParseMember(q)
		assert.Equal(t, "default", base, q)
	}
}

func TestParseMemberOthers(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"default", "critical", "a:b", "x:p3", "x:p6", "x:l1", "x:p1:l0", "x:p1:l9", "x:p1:l01", ":p1", "x:p12"} {
		base, p, lane, ok := queue.ParseMember(name)
		assert.False(t, ok, name)
		assert.Equal(t, name, base, name)
		assert.Equal(t, queue.DefaultPriority, p, name)
		assert.Equal(t, 0, lane, name)
	}
}

func TestReserved(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"default": false, "critical": false, "a:b": false, "x:pa": false, "x:l1": false, ":p1": false,
		"x:p1": true, "x:p3": true, "x:p9": true, "x:p2:l1": true, "x:p9:l7": true,
	} {
		assert.Equal(t, want, queue.Reserved(name), name)
	}
}
