// Package backoff computes retry delays: exponential backoff with jitter, the delay a server asks for in Retry-After, and what an upstream's answer says of its rate limits in any common dialect (ParseAnswer).
package backoff
