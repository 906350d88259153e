package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicehq/sluice/internal/redistest"
)

// Acquire counts each call under its outcome and ends its span, whether the
// grant came at once (no Reservation is made for it), after a wait, or not
// at all.
func TestAcquireOutcomes(t *testing.T) {
	for name, store := range map[string]func() Store{
		"memory": func() Store { return NewMemoryStore() },
		"redis":  func() Store { return NewRedisStore(redistest.Shared(t).Client(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			spans := tracetest.NewSpanRecorder()
			lim := NewLimiter(store(), WithKeyPrefix(redistest.Prefix(t)),
				WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
				WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))))
			limit := Limit{Rate: 2, Period: time.Second, Burst: 1} // a token every 500 ms
			ctx := context.Background()
			count := func(o string) int64 {
				return fbSum(t, reader, "sluice.throttle.acquisitions", attribute.String("sluice.outcome", o))
			}

			// The burst, at once, under a deadline it is far from.
			within, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			require.NoError(t, lim.Acquire(within, "k", limit, 1))
			assert.Equal(t, int64(1), count("granted"))

			require.NoError(t, lim.Acquire(ctx, "k", limit, 1)) // the next token, 500 ms on
			assert.Equal(t, int64(1), count("waited"))

			// The slot after it is 500 ms off: past a 100 ms budget.
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			var limited *LimitedError
			require.ErrorAs(t, lim.Acquire(short, "k", limit, 1), &limited)
			assert.Equal(t, int64(1), count("denied"))

			// The same slot, waited for until the caller gives up.
			gone, stop := context.WithCancel(ctx)
			time.AfterFunc(100*time.Millisecond, stop)
			require.ErrorIs(t, lim.Acquire(gone, "k", limit, 1), context.Canceled)
			assert.Equal(t, int64(1), count("canceled"))

			assert.Equal(t, int64(1), count("granted"), "no call counted twice")
			ended := spans.Ended()
			require.Len(t, ended, 4, "every call's span ends")
			for i, s := range ended {
				assert.Equal(t, "throttle.Acquire", s.Name(), "span %d", i)
			}
			assert.Empty(t, ended[0].Events(), "a grant at once records nothing on its span")
			assert.NotEmpty(t, ended[1].Events(), "a grant waited for records its wait")
		})
	}
}
