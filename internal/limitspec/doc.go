// Package limitspec parses the limits a worker enforces, from --limit flags and from a limits file.
//
// A limit for one task type is written
//
//	TYPE=RATE/UNIT[,name=NAME][,burst=N][,key=TEMPLATE][,max-wait=DURATION][,cost=N|{TEMPLATE}][,global=RATE/UNIT[:BURST]][,in-flight=N|auto[:[FLOOR-]CEIL]]
//
// for example
//
//	http:request=50/s,burst=5
//	email:send=100/m,burst=10,key=tenant:{payload.tenant}
//
// RATE is a positive decimal number of tokens (50, 0.5) and UNIT one of s, m
// or h (also sec, second, min, minute, hour, and their plurals). A burst left
// out defaults to the tokens the bucket earns in one second, rounded up, and at
// least 1: 50/s gets 50, 100/m gets 2, 0.5/s gets 1. The same default applies to
// the burst of a global limit written without ":BURST". in-flight=N lets at most
// N jobs of one key run at once across the fleet; in-flight=auto makes that
// bound follow the upstream's latency, from FLOOR (1) to CEIL (1000) as
// in-flight=auto:CEIL or auto:FLOOR-CEIL say (throttle.Concurrency.Auto).
//
// A type may have several limits, taken together, all or nothing: one spec
// each, each with name=NAME, read together by [ParseAll]:
//
//	http:request=3000/m,name=requests
//	http:request=90000/m,name=tokens,cost={body.max_tokens}
//
// cost= is a number, or a template that reads each job's cost from it:
// {payload.FIELD}, {header.NAME}, and for http:request {body.FIELD}.
//
// The limits file holds the same fields as JSON or YAML, a type's named
// limits as a list under it; see [LoadFile]. [Merge] combines the two,
// flags winning.
//
// A [Spec] is the workers.Policy a pool enforces, with the key template its
// Key was made from: the type is the policy's Name (checked by
// workers.CheckName, as the pool checks it), and a program that reads a
// spec's buckets names them with workers.BucketKey and workers.GlobalKey,
// as the pool does.
package limitspec
