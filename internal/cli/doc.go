// Package cli holds what sluice's commands share: flags with their environment variables and --version, the signal-handling main, Redis URLs, reaching Redis, and reporting errors with exit codes.
//
// The commands exit with
//
//	0    success
//	1    a runtime failure, such as Redis going away part way
//	2    bad usage or input: a bad flag, URL, payload or limit, caught before any work
//	130  interrupted (SIGINT or SIGTERM) before finishing
package cli
