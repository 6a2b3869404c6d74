package jobs_test

import (
	"github.com/callscribe/callscribe/jobs"
	"github.com/callscribe/callscribe/outbox"
)

// commitThrough commits validated recordings through ob.
func commitThrough(ob *outbox.Outbox) jobs.CommitFunc { return ob.CommitStep }
