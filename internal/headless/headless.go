// Package headless starts Debian's Chromium, headless, for the status
// page's browser test and `make screenshot` (through chromedp).
package headless

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/chromedp/chromedp"
)

// Candidates are the browser binaries tried, in order.
var Candidates = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "chromium", "google-chrome"}

// Path returns the browser to run, or an error saying how to install one.
func Path() (string, error) {
	for _, c := range Candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium found (tried %v): install Debian's package with `apt-get install -y chromium` (make test does, as root on Debian or Ubuntu)", Candidates)
}

// New returns a chromedp context on a new headless Chromium with an empty
// profile, kept off the network but for the pages it is sent to. cancel
// stops the browser and removes the profile.
func New(ctx context.Context) (context.Context, context.CancelFunc, error) {
	path, err := Path()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "callscribe-chromium-")
	if err != nil {
		return nil, nil, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(dir),
		chromedp.NoSandbox, // as root in CI; the pages are the project's own
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 1000),
	)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if err := chromedp.Do(bctx); err != nil {
		bcancel()
		acancel()
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("starting %s: %w", path, err)
	}
	return bctx, func() {
		bcancel()
		acancel()
		_ = os.RemoveAll(dir)
	}, nil
}
