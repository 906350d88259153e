// Package httplimit is rate limiting for net/http: a server middleware and a client RoundTripper over a throttle.Limiter.
//
// [Middleware] limits inbound requests per key (client address, API key,
// user) through a [throttle.Limiter], so every replica of a service shares
// one limit when the Limiter's store is Redis. It sets the rate-limit header
// fields on every response it limits, allowed or not, and answers requests
// over the limit with 429 Too Many Requests and Retry-After.
//
// [Transport] is an http.RoundTripper for calling a rate-limited third-party
// API: it takes a token before each request, and when the upstream answers
// 429 (or 503 with Retry-After) it puts the bucket in cooldown, so every
// process that shares the bucket pauses, not only the one that was told.
package httplimit
