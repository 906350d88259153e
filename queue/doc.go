// Package queue carries sluice's task envelope over asynq: enqueueing, the throttled-come-back error, and sending a job back to its queue.
package queue
