package backoff

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseQuota(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	cases := []struct {
		name string
		h    http.Header
		want Quota
		ok   bool
	}{
		{"IETF", h("RateLimit-Policy", `"default";q=100;w=2`, "RateLimit", `"default";r=40;t=1`), Quota{Resource: Requests, Name: "default", Limit: 100, Window: 2 * time.Second, Remaining: 40, Rate: 50, Reset: time.Second}, true},
		{"IETF exhausted", h("RateLimit-Policy", `"default";q=50;w=1`, "RateLimit", `"default";r=0;t=3`), Quota{Resource: Requests, Name: "default", Limit: 50, Window: time.Second, Rate: 50, Exhausted: true, Reset: 3 * time.Second}, true},
		{"IETF first of two policies", h("RateLimit-Policy", `"burst";q=10;w=1, "day";q=1000;w=86400`), Quota{Resource: Requests, Name: "burst", Limit: 10, Window: time.Second, Rate: 10}, true},
		{"X- delta seconds", h("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "30", "X-RateLimit-Reset", "3"), Quota{Resource: Requests, Limit: 100, Remaining: 30, Rate: 10, Reset: 3 * time.Second}, true},
		{"X- epoch seconds", h("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1800000020"), Quota{Resource: Requests, Exhausted: true, Reset: 20 * time.Second}, true},
		{"X- reset of a second: no rate", h("X-RateLimit-Limit", "50", "X-RateLimit-Remaining", "4", "X-RateLimit-Reset", "1"), Quota{Resource: Requests, Limit: 50, Remaining: 4, Reset: time.Second}, true},
		{"X- no reset", h("X-RateLimit-Remaining", "7"), Quota{Resource: Requests, Remaining: 7}, true},
		{"nothing", h(), Quota{}, false},
		{"garbage", h("X-RateLimit-Remaining", "many"), Quota{}, false},
		{"IETF garbage", h("RateLimit-Policy", `"default";q=lots`), Quota{}, false},
	}
	for _, c := range cases {
		got, ok := ParseQuota(c.h, now)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}
