// Package httpjob is sluice's built-in job type "http:request": a job that makes one HTTP request.
//
// The payload is JSON such as
//
//	{"url": "https://api.example.com/v1/charge", "method": "POST",
//	 "headers": {"Content-Type": "application/json"}, "body": "{\"amount\": 100}"}
//
// and [Handler] runs it. A refusal (a 429, a 503, or a 403 that says it is a
// limit, in any dialect backoff.ParseAnswer reads) becomes a
// *workers.UpstreamError, which makes the worker pool pause the upstream's
// bucket on every host; see [Handler.ProcessTask] for the other outcomes.
//
// Whoever can enqueue an http:request job can make the workers send any
// request they can reach, internal addresses included: run them where that is
// acceptable, or give the Handler a Client whose transport restricts where it
// dials.
package httpjob
