package limitspec

import (
	"errors"
	"maps"
	"reflect"
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
		if err := throttle.Validate(sp.Limit); err != nil {
			t.Fatalf("Parse(%q): limit %v does not validate: %v", s, sp.Limit, err)
		}
		if sp.Global != nil {
			if err := throttle.Validate(sp.Global); err != nil {
				t.Fatalf("Parse(%q): global %v does not validate: %v", s, sp.Global, err)
			}
		}
		if (sp.KeyTemplate != "") != (sp.Key != nil) {
			t.Fatalf("Parse(%q) = %+v: key template %q but Key %v", s, sp, sp.KeyTemplate, sp.Key != nil)
		}
		if sp.Name == "" || len(sp.Name) > workers.MaxPolicyName || len(sp.KeyTemplate) > workers.MaxKeyTemplate || mostOf(sp.Limit) < 1 || sp.Cost < 0 || sp.MaxWait < 0 {
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
