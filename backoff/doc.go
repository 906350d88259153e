// Package backoff computes retry delays: exponential backoff with jitter, and the delay a server asks for in Retry-After.
package backoff
