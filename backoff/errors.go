package backoff

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidPolicy is wrapped by the errors that Exponential.Validate and
// Decorrelated.Validate return.
var ErrInvalidPolicy = errors.New("backoff: invalid policy")

// checkBaseMax checks the Base and Max that every policy has; kind names the policy.
func checkBaseMax(kind string, base, maxd time.Duration) error {
	switch {
	case base <= 0:
		return fmt.Errorf("%w: %s Base %v must be > 0", ErrInvalidPolicy, kind, base)
	case maxd < 0:
		return fmt.Errorf("%w: %s Max %v must be >= 0", ErrInvalidPolicy, kind, maxd)
	case maxd > 0 && maxd < base:
		return fmt.Errorf("%w: %s Max %v is less than Base %v", ErrInvalidPolicy, kind, maxd, base)
	case maxd == 0 && base > MaxDelay:
		return fmt.Errorf("%w: %s Base %v is more than MaxDelay %v", ErrInvalidPolicy, kind, base, MaxDelay)
	}
	return nil
}
