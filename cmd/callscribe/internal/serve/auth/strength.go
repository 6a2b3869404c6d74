package auth

import (
	"errors"
	"fmt"
)

// The least a secret handed to serve by hand (CALLSCRIBE_API_TOKEN) must
// have: 32 random bytes, which are 43 characters in unpadded base64url.
const (
	// MinSecretLen is the shortest secret CheckSecret accepts.
	MinSecretLen = 43
	// MinSecretDistinct is the fewest distinct characters CheckSecret
	// accepts in a secret of its own making (not a token of Create).
	MinSecretDistinct = 16
	// minHexDistinct is the fewest distinct hex digits CheckSecret accepts
	// in the 64-digit secret of a token of Create. 64 random hex digits
	// miss 3 or more of the 16 about once in 1,100 draws, so they are not held
	// to MinSecretDistinct; missing 7 or more happens about once in 10^12.
	minHexDistinct = 10
)

// ErrWeakSecret: CheckSecret refused a secret.
var ErrWeakSecret = errors.New("tokens: the token is too weak")

// HowToMakeSecret tells how to make a secret CheckSecret accepts.
const HowToMakeSecret = "make one with `openssl rand -base64 32` or `callscribe tokens create --admin`"

// CheckSecret returns nil when s looks like at least 32 random bytes: a
// token of Create (whose secret is 32 random bytes), or at least
// MinSecretLen characters of which at least MinSecretDistinct are distinct
// (`openssl rand -base64 32` makes 44). Otherwise an error wrapping
// ErrWeakSecret that says how to make one; it never quotes s.
func CheckSecret(s string) error {
	if m := tokenRE.FindStringSubmatch(s); m != nil {
		if n := distinct(m[2]); n < minHexDistinct {
			return fmt.Errorf("%w: its secret has %d distinct hex digits, not random: %s", ErrWeakSecret, n, HowToMakeSecret)
		}
		return nil
	}
	if len(s) < MinSecretLen {
		return fmt.Errorf("%w: %d characters, want at least %d (32 random bytes): %s", ErrWeakSecret, len(s), MinSecretLen, HowToMakeSecret)
	}
	if n := distinct(s); n < MinSecretDistinct {
		return fmt.Errorf("%w: %d distinct characters, want at least %d (32 random bytes): %s", ErrWeakSecret, n, MinSecretDistinct, HowToMakeSecret)
	}
	return nil
}

// distinct counts the distinct bytes of s.
func distinct(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}
