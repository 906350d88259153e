package limitspec

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// FuzzParse checks that Parse never panics, that what it accepts validates
// and round-trips through String, and that what it rejects is an ErrInvalid
// naming the spec.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"http:request=50/s,burst=5",
		"email:send=100/m,burst=10,key=tenant:{payload.tenant}",
		"llm:call=500/m,burst=20,key={type}:{payload.account},max-wait=2s,cost=3,global=5000/m:100",
		"a=0.5/second,global=1/h",
		"a=1/s,in-flight=5",
		"x=50/q",
		"a=1/s,,",
		"a=1000000/s,burst=1",
		"a=1/h,burst=1073741824",
		"a=99999999999999999999999/s",
		"a=1/s,key={{}}",
		"a=1/s,max-wait=9223372036854775807ns",
		"http:request=90000/m,name=tokens,cost={body.max_tokens}",
		"a=5/s,name=r,cost={header.n},global=10/s",
		"t=10/s,key=tenant:{payload.t},global=600/m:20,adapt=key,floor=2/s",
		"t=10/s,policy=sliding-log,key=k:{payload.t},global=600/m:20,floor=60/m",
		"http:request=2000/day,policy=fixed-window,zone=America/Los_Angeles",
		"a=5/week,zone=Asia/Kathmandu,name=w",
		"a=1000000/months,zone=UTC",
		"a=5/day,policy=sliding-log",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q): error %v does not match ErrInvalid", s, err)
			}
			if !strings.HasPrefix(err.Error(), "limit ") {
				t.Fatalf("Parse(%q): error %q does not name the spec", s, err)
			}
			return
		}
		if err := sp.Validate(); err != nil {
			t.Fatalf("Parse(%q) = %+v, which does not validate: %v", s, sp, err)
		}
		for _, l := range sp.All() {
			if err := throttle.Validate(l.Limit); err != nil {
				t.Fatalf("Parse(%q): limit %v does not validate: %v", s, l.Limit, err)
			}
			if mostOf(l.Limit) < 1 || l.Cost < 0 {
				t.Fatalf("Parse(%q) = %+v: out of bounds", s, sp)
			}
		}
		if sp.Global != nil {
			if err := throttle.Validate(sp.Global); err != nil {
				t.Fatalf("Parse(%q): global %v does not validate: %v", s, sp.Global, err)
			}
		}
		if (sp.KeyTemplate != "") != (sp.Key != nil) {
			t.Fatalf("Parse(%q) = %+v: key template %q but Key %v", s, sp, sp.KeyTemplate, sp.Key != nil)
		}
		if sp.Name == "" || len(sp.Name) > workers.MaxPolicyName || len(sp.KeyTemplate) > workers.MaxKeyTemplate || sp.MaxWait < 0 {
			t.Fatalf("Parse(%q) = %+v: out of bounds", s, sp)
		}
		again, err := Parse(sp.String())
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q, which does not parse: %v", s, sp.String(), err)
		}
		if again.String() != sp.String() || !equal(again, sp) {
			t.Fatalf("round trip of %q through %q gave %+v, want %+v", s, sp.String(), again, sp)
		}
		if utf8.ValidString(s) && !utf8.ValidString(sp.String()) {
			t.Fatalf("String of valid UTF-8 %q is not: %q", s, sp.String())
		}
	})
}

func equal(a, b Spec) bool {
	fa, fb := flatOf(a), flatOf(b)
	if !maps.Equal(fa.Weights, fb.Weights) {
		return false
	}
	fa.Weights, fb.Weights = nil, nil
	return reflect.DeepEqual(fa, fb)
}

// FuzzParseAll checks ParseAll as FuzzParse checks Parse, for specs of
// several limits per type (one spec a line): what it accepts validates and
// reads back from its Flags.
func FuzzParseAll(f *testing.F) {
	for _, s := range []string{
		"http:request=3000/m,name=requests\nhttp:request=90000/m,name=tokens,cost={body.max_tokens}",
		"a=5/s,key={payload.t},global=10/s\na=100/h,name=daily\nb=1/s",
		"a=5/s\na=6/s",
		"a=5/s,name=r,adapt=off\na=5/s,name=t,adapt=off",
		"a=5/s,name=r,cost={header.n}\na=1/m,name=t,policy=sliding-log,cost=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		specs, err := ParseAll(strings.Split(s, "\n"))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseAll(%q): error %v does not match ErrInvalid", s, err)
			}
			return
		}
		for _, sp := range specs {
			if err := sp.Validate(); err != nil {
				t.Fatalf("ParseAll(%q) = %+v, which does not validate: %v", s, sp, err)
			}
			again, err := ParseAll(sp.Flags())
			if err != nil {
				t.Fatalf("ParseAll(%q): Flags %q do not parse: %v", s, sp.Flags(), err)
			}
			if len(again) != 1 || !equal(again[0], sp) || !slices.Equal(again[0].Flags(), sp.Flags()) {
				t.Fatalf("round trip of %q through %q gave %+v, want %+v", s, sp.Flags(), again, sp)
			}
		}
	})
}
