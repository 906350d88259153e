package main

import "github.com/sluicehq/sluice/internal/jitter"

// The run's probe of the machine's scheduling lateness: a worker's timer,
// the upstream's handler and the loopback are late by as much, and a request
// that arrives late, followed by others on time, looks at the upstream like
// a token taken early. The grant check allows, near each arrival, the
// lateness the probe saw there (jitter.Probe.WorstIn).
type jitterProbe = jitter.Probe

func startJitterProbe() *jitterProbe { return jitter.Start() }
