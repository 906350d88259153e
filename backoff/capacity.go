package backoff

// CapacityRate is the rate at which a token bucket configured at rate with
// burst holds the capacity q announces without a rate: rate·Limit/burst, the
// bucket's rate and burst scaled down together, as an adaptive bucket's are
// (Shopify's call limit, USED/CAPACITY; X-RateLimit-Limit beside a reset
// too short to read a rate from). It is 0, saying nothing, when q says a
// rate (that one applies), no limit, or a limit at or above burst: it only
// ever lowers a rate, never guesses one higher. rate is in the caller's
// unit (per second, per minute), and so is the result.
func (q Quota) CapacityRate(rate float64, burst int) float64 {
	b := float64(burst)
	if q.Rate > 0 || q.Limit <= 0 || q.Limit >= b || rate <= 0 {
		return 0
	}
	return rate * q.Limit / b
}
