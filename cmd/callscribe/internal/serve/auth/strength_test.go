package auth_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/callscribe/callscribe/cmd/callscribe/internal/serve/auth"
	"github.com/callscribe/callscribe/internal/testdb"
)

func TestCheckSecret(t *testing.T) {
	t.Parallel()
	for _, weak := range []string{
		"a", "tok", "admin-tok", "mp-token",
		strings.Repeat("a", 64),                         // long, one character
		"abcdefghijklmnoabcdefghijklmnoabcdefghijklmno", // 45 characters, 15 distinct
		"0123456789abcdefghijklmnopqrstuvwxyzABCDEF",    // 42 characters
		"cs_1_" + strings.Repeat("0", 64),               // Create's shape, no randomness
		"cs_1_" + strings.Repeat("01234567", 8),
	} {
		err := auth.CheckSecret(weak)
		if !errors.Is(err, auth.ErrWeakSecret) {
			t.Errorf("CheckSecret(%q): %v, want ErrWeakSecret", weak, err)
			continue
		}
		for _, want := range []string{"openssl rand -base64 32", "callscribe tokens create --admin"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("CheckSecret(%q): %q does not say %q", weak, err, want)
			}
		}
		if len(weak) > 8 && strings.Contains(err.Error(), weak) {
			t.Errorf("CheckSecret quotes the secret: %q", err)
		}
	}
	var b [32]byte
	for i := range 100_000 {
		_, _ = rand.Read(b[:])
		for _, s := range []string{
			base64.StdEncoding.EncodeToString(b[:]),                                                  // openssl rand -base64 32: 44 characters
			base64.RawURLEncoding.EncodeToString(b[:]),                                               // 43
			"cs_" + []string{"1", "42", "9000000000000000000"}[i%3] + "_" + hex.EncodeToString(b[:]), // tokens create
		} {
			if err := auth.CheckSecret(s); err != nil {
				t.Fatalf("CheckSecret(%q): %v", s, err)
			}
		}
	}
}

// TestCheckSecretOfCreate: the tokens Create makes pass, admin or not.
func TestCheckSecretOfCreate(t *testing.T) {
	t.Parallel()
	s := auth.New(testdb.New(t))
	for i := range 20 {
		tenant, admin := "acme", i%2 == 0
		if admin {
			tenant = ""
		}
		_, secret, err := s.Create(context.Background(), tenant, "n", admin)
		if err != nil {
			t.Fatal(err)
		}
		if err := auth.CheckSecret(secret); err != nil {
			t.Fatalf("CheckSecret(a token of Create): %v", err)
		}
	}
}
