package riverunique_test

import (
	"slices"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"github.com/callscribe/callscribe/internal/riverunique"
)

func TestByArgs(t *testing.T) {
	for _, c := range []struct {
		name string
		also []rivertype.JobState
		want []rivertype.JobState
	}{
		{"periodic", nil, []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
			rivertype.JobStateRunning, rivertype.JobStateScheduled}},
		{"retrying", []rivertype.JobState{rivertype.JobStateRetryable}, []rivertype.JobState{rivertype.JobStateAvailable,
			rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}},
	} {
		u := riverunique.ByArgs(c.also...)
		if !u.ByArgs || !slices.Equal(u.ByState, c.want) || u.ByPeriod != 0 || u.ByQueue {
			t.Errorf("%s: %+v, want unique by args only while %v", c.name, u, c.want)
		}
	}
}
