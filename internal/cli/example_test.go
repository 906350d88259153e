package cli_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/sluicehq/sluice/internal/cli"
)

func ExampleRedisFromURL() {
	opt, aopt, err := cli.RedisFromURL("rediss://worker:s3cret@redis.example.com:6380/2")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(opt.Addr, opt.Username, opt.DB, opt.TLSConfig.ServerName, opt.ContextTimeoutEnabled)
	fmt.Println(aopt.Addr, aopt.DB)

	_, _, err = cli.RedisFromURL("redis://worker:s3cret@redis.example.com/two")
	fmt.Println(err)
	fmt.Println(cli.ExitCode(err))
	// Output:
	// redis.example.com:6380 worker 2 redis.example.com true
	// redis.example.com:6380 2
	// Redis URL redis://worker:xxxxx@redis.example.com/two: database "two" is not a number from 0 up (want /DB after the host, e.g. /0)
	// 2
}

func ExampleParseRedis() {
	for _, url := range []string{
		"redis://127.0.0.1:6379/0",
		"redis-cluster://worker:s3cret@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3",
		"redis-sentinel://10.0.0.1,10.0.0.2,10.0.0.3/2?master=jobs",
	} {
		r, err := cli.ParseRedis(url)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %T\n", r.Addr(), r.Asynq())
	}
	_, err := cli.ParseRedis("redis-cluster://worker:s3cret@10.0.0.1:7000/1")
	fmt.Println(err)
	// Output:
	// 127.0.0.1:6379: asynq.RedisClientOpt
	// Redis Cluster 10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:6379: asynq.RedisClusterClientOpt
	// master jobs of Sentinel 10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379: asynq.RedisFailoverClientOpt
	// Redis URL redis-cluster://worker:xxxxx@10.0.0.1:7000/1: a Redis Cluster has database 0 only
}

func ExampleReport() {
	code := cli.Report(os.Stdout, "enqueue", cli.Usagef("--count %d is out of range [1, 10000000]", 0))
	fmt.Println(code)
	code = cli.Report(os.Stdout, "enqueue", errors.New("cannot reach Redis at 127.0.0.1:6390: connection refused"))
	fmt.Println(code)
	// Output:
	// enqueue: --count 0 is out of range [1, 10000000]
	// 2
	// enqueue: cannot reach Redis at 127.0.0.1:6390: connection refused
	// 1
}

// A command's flags: each may come from its SLUICE_ variable, --redis from
// REDIS_URL at last, and Parsed ends the command for --help, --version or a
// bad flag.
func ExampleFlags() {
	os.Setenv("SLUICE_COUNT", "3")
	defer os.Unsetenv("SLUICE_COUNT")
	fs := cli.NewFlags("enqueue")
	redisURL := fs.String("redis", "", "")
	count := fs.Int("count", 1, "")
	fs.Fallback("redis", "REDIS_URL")
	err := fs.Parse([]string{"--redis", "redis://127.0.0.1:6379/0"})
	fmt.Println(*redisURL, *count, err)

	fs = cli.NewFlags("enqueue")
	fs.Int("count", 1, "")
	err = fs.Parse([]string{"--count", "many"})
	code, done := cli.Parsed(err, "enqueue", "Usage: enqueue [flags]\n", os.Stdout, os.Stdout)
	fmt.Println(code, done)
	// Output:
	// redis://127.0.0.1:6379/0 3 <nil>
	// enqueue: invalid value "many" for flag -count: parse error
	// Run 'enqueue --help' for usage.
	// 2 true
}
