package orgcap

import "errors"

var (
	// ErrInvalid is what Store returns, wrapped in an *InvalidError, for a
	// change it refuses.
	ErrInvalid = errors.New("orgcap: invalid cap")
	// ErrNotFound is what Store returns for an organisation or campaign
	// without a stored cap.
	ErrNotFound = errors.New("orgcap: no stored cap")
)

// InvalidError names the field of a change that Store refused.
// errors.Is(err, ErrInvalid) is true for it.
type InvalidError struct {
	// Field is "org", "campaign", "limit", "reason" or "by".
	Field string
	// Reason says what is wrong, without repeating a long value.
	Reason string
}

func (e *InvalidError) Error() string { return "orgcap: " + e.Field + " " + e.Reason }

// Is reports whether target is ErrInvalid.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }
