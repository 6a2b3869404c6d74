//go:build !linux

package devservice

import (
	"fmt"
	"os"
)

func runHelper(mode string) int {
	fmt.Fprintf(os.Stderr, "helper mode %q is only implemented on Linux\n", mode)
	return 2
}
