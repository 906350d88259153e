package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/throttle"
)

// TestTransportDialects: the Transport reads each dialect's refusal through
// backoff.ParseAnswer: a GitHub 403 with a spent quota or a Retry-After is a
// throttle and cools the bucket; a plain 403 does not; Discord's wait comes
// from the JSON body, which the caller still reads whole.
func TestTransportDialects(t *testing.T) {
	inThree := strconv.FormatInt(time.Now().Add(3*time.Second).Unix(), 10)
	const discord = `{"message": "You are being rate limited.", "retry_after": 0.64, "global": false}`
	cases := []struct {
		name     string
		status   int
		header   []string
		body     string
		min, max time.Duration // the cooldown left after the answer; 0, 0: none
	}{
		{"GitHub primary: 403, remaining 0", 403, []string{"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", inThree, "X-RateLimit-Resource", "core"}, `{"message":"API rate limit exceeded"}`, time.Second, 3 * time.Second},
		{"GitHub secondary: 403, Retry-After", 403, []string{"Retry-After", "2", "X-RateLimit-Remaining", "4000"}, "", time.Second, 2 * time.Second},
		{"a plain 403", 403, []string{"X-RateLimit-Remaining", "4000"}, `{"message":"Forbidden"}`, 0, 0},
		{"Discord: 429, retry_after in the body", 429, []string{"Content-Type", "application/json", "X-RateLimit-Reset-After", "5"}, discord, 300 * time.Millisecond, 640 * time.Millisecond},
		{"Shopify: 429, Retry-After 2.0", 429, []string{"X-Shopify-Shop-Api-Call-Limit", "40/40", "Retry-After", "2.0"}, "", time.Second, 2 * time.Second},
		{"OpenAI: 429, retry-after-ms", 429, []string{"retry-after-ms", "700", "retry-after", "1"}, "", 300 * time.Millisecond, 700 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for i := 0; i+1 < len(c.header); i += 2 {
					w.Header().Set(c.header[i], c.header[i+1])
				}
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			t.Cleanup(up.Close)
			lim := throttle.NewLimiter(throttle.NewMemoryStore())
			tr := &Transport{Base: up.Client().Transport, Limiter: lim, Limit: fastLimit}
			resp, err := client(tr).Get(up.URL)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, c.status, resp.StatusCode)
			assert.Equal(t, c.body, string(body), "the caller reads the body whole")

			left, err := lim.CooldownLeft(context.Background(), hostOf(up.URL))
			require.NoError(t, err)
			if c.max == 0 {
				assert.Zero(t, left)
				return
			}
			assert.GreaterOrEqual(t, left, c.min)
			assert.LessOrEqual(t, left, c.max)
		})
	}
}

// TestTransportOnMalformed: fields that cannot be read are told once per
// bucket, not once per answer, and the refusal is handled without them.
func TestTransportOnMalformed(t *testing.T) {
	up := newUpstream(t, reply{429, "soon"})
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	var told []error
	tr := &Transport{Base: up.Client().Transport, Limiter: lim, Limit: fastLimit,
		Backoff:     backoff.Exponential{Base: 10 * time.Millisecond},
		OnMalformed: func(key string, err error) { assert.Equal(t, up.host(), key); told = append(told, err) }}
	for range 3 {
		send(t, client(tr), up.URL)
	}
	require.Len(t, told, 1)
	assert.True(t, errors.Is(told[0], backoff.ErrMalformed), "%v", told[0])
	assert.Len(t, up.times(), 3)
}

func hostOf(u string) string {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	return req.URL.Host
}
