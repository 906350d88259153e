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
