package backoff

import (
	"math"
	"math/rand/v2"
)

// Source supplies the randomness for jitter. Float64 returns a number in
// [0, 1), like math/rand/v2's Float64. Values outside that range are clamped
// (NaN and negatives count as 0, values of 1 or more as just under 1), so a
// faulty Source can skew delays but never push them outside their bounds.
//
// A Source shared between goroutines must be safe for concurrent use; the
// package default is.
type Source interface {
	Float64() float64
}

// SourceFunc adapts a function to a Source, which is handy for fixed values in
// tests: SourceFunc(func() float64 { return 0.5 }).
type SourceFunc func() float64

// Float64 returns f().
func (f SourceFunc) Float64() float64 { return f() }

// defaultSource draws from math/rand/v2's global generator, which is safe for
// concurrent use and needs no seeding.
type defaultSource struct{}

func (defaultSource) Float64() float64 { return rand.Float64() }

// justBelowOne is the largest float64 less than 1.
var justBelowOne = math.Nextafter(1, 0)

// draw returns a number in [0, 1) from s, or from the package default when s
// is nil.
func draw(s Source) float64 {
	if s == nil {
		s = defaultSource{}
	}
	r := s.Float64()
	switch {
	case !(r > 0): // also catches NaN
		return 0
	case r >= 1:
		return justBelowOne
	}
	return r
}
