package throttle

import (
	"context"
	"strconv"
)

// reserveAlgo runs req's policy's reserve script; see the algo contract in policy.go.
func (s *RedisStore) reserveAlgo(ctx context.Context, req request) (decision, error) {
	a := req.pol
	reserve, _ := a.scripts()
	args := append([]any{s.now(), strconv.FormatInt(req.maxWait, 10), req.one.N}, a.args()...)
	v, err := reserve.Run(ctx, s.rdb, []string{algoKey(req.prefix, req.one.Key, a)}, args...).Result()
	if err != nil {
		return decision{}, s.fail("reserve", err)
	}
	d, err := parseDecision(v, 1)
	if err != nil {
		return decision{}, storeErr("reserve", err)
	}
	return d, nil
}

// refundAlgo runs req's policy's refund script.
func (s *RedisStore) refundAlgo(ctx context.Context, req request, d decision, id string) (bool, error) {
	a := req.pol
	_, refund := a.scripts()
	key := algoKey(req.prefix, req.one.Key, a)
	args := append([]any{s.now(), strconv.FormatInt(d.slot(), 10), req.one.N, d.tat}, a.args()...)
	v, err := refund.Run(ctx, s.rdb, []string{key, key + ":refund:" + id}, args...).Int64()
	if err != nil {
		return false, s.fail("refund", err)
	}
	return v == 1, nil
}
