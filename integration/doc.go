// Package integration holds sluice's black-box tests: the built worker and
// enqueue commands, real redis-server processes, a fake upstream API, and faults.
//
// Run them with go test ./integration/ (scripts/test runs them with the rest).
// They need redis-server (see internal/redistest) and build cmd/worker and
// cmd/enqueue once per run. A longer soak: go test ./integration/ -run Soak
// -soak 5m, or SLUICE_SOAK=long. SLUICE_IT_LOGS=DIR keeps every worker's
// output in DIR.
package integration
