// Command callscribe is the one binary of callscribe: see `callscribe --help`.
package main

import (
	"os"

	"github.com/callscribe/callscribe/cmd/callscribe/cli"
)

func main() {
	ctx, stop := signalContext()
	code := cli.Run(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
