package throttle

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// runInts runs script as Script.Run does (EVALSHA, then EVAL if the server
// lacks it) for a reply that is an array of integers, read straight into a
// slice: a plain Cmd's reply boxes every integer above 255 into an
// interface, an allocation each.
func runInts(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args []any) ([]int64, error) {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmdArgs = append(cmdArgs, args...)
	cmd := redis.NewIntSliceCmd(ctx, cmdArgs...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // a cluster routes by the first key, as it does EVALSHA
	}
	_ = rdb.Process(ctx, cmd)
	if err := cmd.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return cmd.Val(), err
	}
	return script.Eval(ctx, rdb, keys, args...).Int64Slice() // EVAL caches it for the next EVALSHA
}
