package backoff

import "errors"

// ErrInvalidPolicy is wrapped by the errors that Exponential.Validate and
// Decorrelated.Validate return.
var ErrInvalidPolicy = errors.New("backoff: invalid policy")
