// SPDX-License-Identifier: Apache-2.0

package hwyattn

import "fmt"

// Status is the C ABI's hwyattn_status: why a call failed.
type Status int

// The status codes of include/hwyattn.h (stable values).
const (
	OK              Status = 0 // HWYATTN_OK
	InvalidArgument Status = 1 // HWYATTN_INVALID_ARGUMENT: the request is wrong
	Unsupported     Status = 2 // HWYATTN_UNSUPPORTED: valid, but this build cannot do it
	OutOfMemory     Status = 3 // HWYATTN_OUT_OF_MEMORY
	InternalError   Status = 4 // HWYATTN_INTERNAL_ERROR: a bug in hwyattn; please report it
)

// String names the status, e.g. "invalid argument".
func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case InvalidArgument:
		return "invalid argument"
	case Unsupported:
		return "unsupported"
	case OutOfMemory:
		return "out of memory"
	case InternalError:
		return "internal error"
	}
	return fmt.Sprintf("status %d", int(s))
}

// Error is every error this package returns. Message names the argument and
// the value, e.g. "k: shape[3] (head_dim) is 48 but q has 64": the library's
// hwyattn_last_error() for failures the library reports, or the Go side's
// own text for what it checks before calling C (slice lengths, the scale).
// Nothing is written to any output when a call fails.
//
// Use errors.As to read it, or errors.Is with one of the Err* values to test
// the status alone:
//
//	var e *hwyattn.Error
//	if errors.As(err, &e) && e.Status == hwyattn.InvalidArgument { ... }
//	if errors.Is(err, hwyattn.ErrInvalidArgument) { ... }
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "hwyattn: " + e.Status.String()
	}
	return "hwyattn: " + e.Status.String() + ": " + e.Message
}

// Is reports whether target is an *Error with the same Status and either no
// Message (the Err* values) or the same one.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status && (t.Message == "" || t.Message == e.Message)
}

// Values for errors.Is(err, hwyattn.ErrInvalidArgument) and the like: they
// match any *Error of their status.
var (
	ErrInvalidArgument = &Error{Status: InvalidArgument}
	ErrUnsupported     = &Error{Status: Unsupported}
	ErrOutOfMemory     = &Error{Status: OutOfMemory}
	ErrInternal        = &Error{Status: InternalError}
)

func invalidf(format string, args ...interface{}) error {
	return &Error{Status: InvalidArgument, Message: fmt.Sprintf(format, args...)}
}
