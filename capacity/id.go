package capacity

import (
	"fmt"
)

// IDError names the id that CheckID refused. errors.Is(err, ErrInvalidID)
// is true for it.
type IDError struct {
	// Field names the id: "org", "campaign", "call_id" or "slot.id".
	Field string
	// Reason says what is wrong, without repeating a long value.
	Reason string
}

func (e *IDError) Error() string { return "capacity: " + e.Field + " " + e.Reason }

// Is reports whether target is ErrInvalidID.
func (e *IDError) Is(target error) bool { return target == ErrInvalidID }

// CheckID returns an *IDError naming field unless v is 1–IDMaxLen bytes of
// A–Z, a–z, 0–9, '.', '_' and '-'. Ids are parts of Redis keys, some of
// them inside a hash tag {…}, so no character that could end the tag or
// the key's part (such as '}' or ':') is allowed. campaign may also be ""
// where a call has none; callers check that before calling CheckID.
func CheckID(field, v string) error {
	if v == "" {
		return &IDError{Field: field, Reason: "is required"}
	}
	if len(v) > IDMaxLen {
		return &IDError{Field: field, Reason: fmt.Sprintf("is %d bytes long, over the %d allowed", len(v), IDMaxLen)}
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
			continue
		}
		return &IDError{Field: field, Reason: fmt.Sprintf("has %q at byte %d: only A-Z a-z 0-9 . _ - are allowed", rune(c), i)}
	}
	return nil
}

// checkOrgCampaign checks org and, unless it is "", campaign.
func checkOrgCampaign(org, campaign string) error {
	if err := CheckID("org", org); err != nil {
		return err
	}
	if campaign == "" {
		return nil
	}
	return CheckID("campaign", campaign)
}
