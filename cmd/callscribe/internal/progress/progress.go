// Package progress reports a command's progress: a redrawn bar on a
// terminal, plain lines anywhere else.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Reporter is what the commands' progress reports do: a redrawn bar on a
// terminal (*progressbar.ProgressBar), plain lines anywhere else
// (*lineProgress).
type Reporter interface {
	Set(n int) error
	Set64(n int64) error
	// Clear takes the bar off the line before other output is written.
	Clear() error
	// Finish ends the report; later calls do nothing.
	Finish() error
}

// Unit says what a progress report counts.
type Unit int

const (
	Count Unit = iota // items: "24/36"
	Bytes             // bytes: "1.2 MB/3.4 MB"
)

// lineInterval is how often a progress report off a terminal
// writes a line.
const lineInterval = 5 * time.Second

// New reports progress towards max (-1: unknown) on w, described
// as desc. On a terminal it is the progress bar, redrawn in place and
// cleared when finished; otherwise (a file, a pipe, a buffer) a plain line
// such as "settling: 24/36 (66%), 12.3s" at most every 5 seconds and a
// last one on Finish, with no carriage returns, so a log stays readable.
func New(w io.Writer, desc string, max int64, unit Unit) Reporter {
	if IsTerminal(w) {
		opts := []progressbar.Option{
			progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc), progressbar.OptionClearOnFinish(),
		}
		if unit == Bytes {
			opts = append(opts, progressbar.OptionShowBytes(true))
		} else {
			opts = append(opts, progressbar.OptionShowCount())
		}
		return progressbar.NewOptions64(max, opts...)
	}
	return newLineProgress(w, desc, max, unit)
}

// IsTerminal says whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// lineProgress is progress off a terminal: one line per Interval at most,
// and a last line on Finish. It is safe for concurrent use.
type lineProgress struct {
	w    io.Writer
	desc string
	max  int64 // -1: unknown
	unit Unit

	// Interval is the least time between two lines before Finish.
	// newLineProgress sets lineInterval; tests shorten it.
	Interval time.Duration
	// Now reads the clock; newLineProgress sets time.Now.
	Now func() time.Time

	mu       sync.Mutex
	start    time.Time
	last     time.Time // when the last line was written, or start
	n        int64
	finished bool
}

func newLineProgress(w io.Writer, desc string, max int64, unit Unit) *lineProgress {
	now := time.Now()
	return &lineProgress{w: w, desc: desc, max: max, unit: unit, Interval: lineInterval, Now: time.Now, start: now, last: now}
}

// Set records that n are done, and writes a line if Interval has passed
// since the last one (or since the start).
func (p *lineProgress) Set(n int) error { return p.Set64(int64(n)) }

// Set64 is Set for an int64.
func (p *lineProgress) Set64(n int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return nil
	}
	p.n = n
	if now := p.Now(); now.Sub(p.last) >= p.Interval {
		p.last = now
		return p.writeLine(now)
	}
	return nil
}

// Clear does nothing: a line, once written, need not be taken back.
func (p *lineProgress) Clear() error { return nil }

// Finish writes the last line, with the count reached (not the maximum, if
// it was not reached).
func (p *lineProgress) Finish() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return nil
	}
	p.finished = true
	return p.writeLine(p.Now())
}

func (p *lineProgress) writeLine(now time.Time) error {
	elapsed := now.Sub(p.start).Seconds()
	var err error
	switch {
	case p.max >= 0:
		pct := int64(100)
		if p.max > 0 {
			pct = p.n * 100 / p.max
		}
		_, err = fmt.Fprintf(p.w, "%s: %s/%s (%d%%), %.1fs\n", p.desc, p.amount(p.n), p.amount(p.max), pct, elapsed)
	default: // unknown maximum
		_, err = fmt.Fprintf(p.w, "%s: %s, %.1fs\n", p.desc, p.amount(p.n), elapsed)
	}
	return err
}

func (p *lineProgress) amount(n int64) string {
	if p.unit == Bytes {
		return formatBytes(n)
	}
	return fmt.Sprint(n)
}

// formatBytes writes n in decimal units, as the progress bar does.
func formatBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
