// Package workers runs asynq handlers in a pool that throttles every job through buckets shared by the fleet.
package workers
