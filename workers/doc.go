// Package workers runs asynq handlers in a pool that throttles every job through buckets and in-flight bounds shared by the fleet.
package workers
