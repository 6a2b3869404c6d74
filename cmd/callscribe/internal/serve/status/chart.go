package status

import "time"

// Chart geometry, in SVG user units.
const (
	chartBarWidth = 8
	chartGap      = 2
	chartHeight   = 120
	// ChartMinutes is how many of the latest minutes the chart shows.
	ChartMinutes = 120
)

// chart is one provider's bars, laid out for the template.
type chart struct {
	Width, Height int
	Bars          []bar
	// LimitY is the limit line's height; Limit its value.
	LimitY int
	Limit  int
	Max    int
}

type bar struct {
	X, Y, W, H int
	Minute     time.Time
	Peak       int
	// Over: the peak passed the limit in force now.
	Over bool
}

// chartOf lays out p's last ChartMinutes per-minute peaks, one bar per
// minute that has one, against the effective limit. The scale's top is
// the larger of the limits and the highest peak.
func chartOf(p Provider) chart {
	peaks := p.Peaks
	if len(peaks) > ChartMinutes {
		peaks = peaks[len(peaks)-ChartMinutes:]
	}
	top := max(p.EffectiveLimit, p.ConfiguredLimit, 1)
	for _, m := range peaks {
		top = max(top, m.Peak)
	}
	c := chart{Width: max(len(peaks), 1)*(chartBarWidth+chartGap) + chartGap, Height: chartHeight + 2, Limit: p.EffectiveLimit, Max: top}
	scale := func(v int) int { return v * chartHeight / top }
	for i, m := range peaks {
		h := scale(m.Peak)
		c.Bars = append(c.Bars, bar{X: chartGap + i*(chartBarWidth+chartGap), Y: chartHeight + 1 - h, W: chartBarWidth, H: h,
			Minute: m.Minute, Peak: m.Peak, Over: m.Peak > p.EffectiveLimit})
	}
	c.LimitY = chartHeight + 1 - scale(p.EffectiveLimit)
	return c
}
