package workers

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestKeyWaitsKeepsTheLongest(t *testing.T) {
	var w keyWaits
	w.add("a", 3*time.Second)
	w.add("a", time.Second)
	w.add("b", 2*time.Second)
	assert.Equal(t, map[string]time.Duration{"a": 3 * time.Second, "b": 2 * time.Second}, w.take())
	assert.Empty(t, w.take(), "drained")
}

func TestKeyWaitsBound(t *testing.T) {
	var w keyWaits
	for i := range maxWaitKeys {
		w.add(fmt.Sprintf("k%d", i), time.Duration(i+1)*time.Millisecond)
	}
	w.add("short", 0)                    // shorter than every kept wait: dropped
	w.add("long", time.Hour)             // takes the place of the shortest, k0
	w.add("k5", 10*time.Second)          // a kept key keeps its place
	w.add("mid", 500*time.Millisecond+1) // takes k1's place
	m := w.take()
	assert.Len(t, m, maxWaitKeys)
	assert.NotContains(t, m, "short")
	assert.NotContains(t, m, "k0")
	assert.NotContains(t, m, "k1")
	assert.Equal(t, time.Hour, m["long"])
	assert.Equal(t, 10*time.Second, m["k5"])
	assert.Contains(t, m, "mid")
}
