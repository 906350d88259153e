package workers_test

import (
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/workers"
)

func TestCostTemplate(t *testing.T) {
	task := asynq.NewTaskWithHeaders("t", []byte(`{"n": 3.0, "big": 1e12, "s": "7", "body": "{\"max_tokens\": 40, \"x\": [1]}"}`),
		map[string]string{"x-cost": "12", "neg": "-2", "sp": " 5 "})
	tests := []struct {
		tmpl string
		want int
		err  string
	}{
		{"{payload.n}", 3, ""},
		{"{header.x-cost}", 12, ""},
		{"{header.sp}", 5, ""},
		{"{body.max_tokens}", 40, ""},
		{"{payload.big}", 0, `payload field "big" is 1e+12, more than 1073741824`},
		{"{payload.s}", 0, `payload field "s" is not a number (JSON string)`},
		{"{payload.missing}", 0, `payload field "missing" is missing`},
		{"{header.neg}", 0, `header "neg" is -2, negative`},
		{"{body.x}", 0, `body field "x" is not a number (JSON array)`},
	}
	for i, tt := range tests {
		f, err := workers.CostTemplate(tt.tmpl)
		require.NoError(t, err, "%d", i)
		n, err := f(task)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, "%d: %s", i, tt.tmpl)
			continue
		}
		require.NoError(t, err, "%d: %s", i, tt.tmpl)
		assert.Equal(t, tt.want, n, "%d: %s", i, tt.tmpl)
	}
	for _, bad := range []string{"", "3", "{payload.n}x", "x{payload.n}", "{type}", "{payload.n}{payload.m}", "{header. x}"} {
		_, err := workers.CostTemplate(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// A cost func never panics, and gives a cost of at least 1 or an error
// that says which template failed.
func FuzzCostTemplate(f *testing.F) {
	f.Add("{payload.n}", []byte(`{"n": 5}`), "3")
	f.Add("{header.h}", []byte(`{}`), "-0")
	f.Add("{body.n}", []byte(`{"body": "{\"n\": 1e400}"}`), "")
	f.Add("{payload.n}", []byte(`{"n": -0.0}`), "9223372036854775808")
	f.Fuzz(func(t *testing.T, tmpl string, payload []byte, header string) {
		cost, err := workers.CostTemplate(tmpl)
		if err != nil {
			return
		}
		n, err := cost(asynq.NewTaskWithHeaders("t", payload, map[string]string{"h": header}))
		if err != nil {
			if !strings.Contains(err.Error(), "cost template") {
				t.Fatalf("error does not say what failed: %v", err)
			}
			return
		}
		if n < 1 || n > 1<<30 {
			t.Fatalf("cost %d out of bounds", n)
		}
	})
}
