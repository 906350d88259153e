package limitspec_test

import (
	"fmt"
	"log"

	"github.com/sluicehq/sluice/internal/limitspec"
)

func ExampleParse() {
	sp, err := limitspec.Parse("email:send=100/m,burst=10,key=tenant:{payload.tenant},max-wait=2s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sp.Name, sp.Limit, sp.KeyTemplate, sp.MaxWait)

	// The burst defaults to a second's worth of tokens.
	sp, _ = limitspec.Parse("http:request=50/s")
	fmt.Println(sp.Limit)

	// At most 100 in any minute, exactly.
	sp, _ = limitspec.Parse("report=100/m,policy=sliding-log")
	fmt.Println(sp.Limit)

	_, err = limitspec.Parse("http:request=50/q")
	fmt.Println(err)
	_, err = limitspec.Parse("report=100/m,policy=sliding-log,burst=10")
	fmt.Println(err)
	// Output:
	// email:send 100/1m0s burst 10 tenant:{payload.tenant} 2s
	// 50/1s burst 50
	// 100 per 1m0s sliding log
	// limit "http:request=50/q": unknown unit "q" (want s, m, h, day, week or month)
	// limit "report=100/m,policy=sliding-log,burst=10": burst does not apply to policy sliding-log (burst is for policy token-bucket)
}

// Flags given on the command line replace the file's entry for the same type.
func ExampleMerge() {
	file := []limitspec.Spec{mustParse("http:request=50/s"), mustParse("email:send=100/m")}
	flags := []limitspec.Spec{mustParse("email:send=10/s,burst=2"), mustParse("sms:send=1/s")}
	merged, err := limitspec.Merge(file, flags)
	if err != nil {
		log.Fatal(err)
	}
	for _, sp := range merged {
		fmt.Println(sp)
	}
	// Output:
	// http:request=50/s,burst=50
	// email:send=10/s,burst=2
	// sms:send=1/s,burst=1
}

func mustParse(s string) limitspec.Spec {
	sp, err := limitspec.Parse(s)
	if err != nil {
		log.Fatal(err)
	}
	return sp
}

// Two specs for one type, each with name=, are its named limits: every job
// takes from both, its tokens from the request body's max_tokens.
func ExampleParseAll() {
	specs, err := limitspec.ParseAll([]string{
		"http:request=3000/m,name=requests",
		"http:request=90000/m,name=tokens,burst=20000,cost={body.max_tokens}",
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range specs[0].Limits {
		fmt.Printf("%s: %v, cost %q\n", l.Name, l.Limit, specs[0].CostTemplates[l.Name])
	}
	_, err = limitspec.ParseAll([]string{"http:request=3000/m", "http:request=90000/m"})
	fmt.Println(err)
	// Output:
	// requests: 3000/1m0s burst 50, cost ""
	// tokens: 90000/1m0s burst 20000, cost "{body.max_tokens}"
	// limits of type "http:request": two limits without name= (give each of the type's limits a name=)
}
