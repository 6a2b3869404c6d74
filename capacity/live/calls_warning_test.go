package live_test

import (
	"context"
	"testing"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/internal/captest"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A call that connects over its transcribers' limit leaves a warning an
// operator sees (the status page lists it); one that fits leaves none.
func TestOverLimitConnectIsRecorded(t *testing.T) {
	t.Parallel()
	rdb := testredis.Client(t)
	leases, err := capacity.New(captest.OnRedis(t, rdb, testredis.Prefix(t, rdb, "warn")), capacity.Config{
		Limits: map[string]capacity.ProviderLimit{"vox/stt": {Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := live.CallProviders{STT: []string{"vox"}}
	if s := live.ConnectTranscriber(ctx, leases, "call-1", p); s.OverLimit {
		t.Fatal("the first call was over the limit")
	}
	if ws, err := leases.Warnings(ctx, 10); err != nil || len(ws) != 0 {
		t.Fatalf("warnings after a call that fit: %v, %v", ws, err)
	}
	if s := live.ConnectTranscriber(ctx, leases, "call-2", p); !s.OverLimit {
		t.Fatal("the second call was not over the limit of 1")
	}
	ws, err := leases.Warnings(ctx, 10)
	if err != nil || len(ws) != 1 || ws[0].Kind != capacity.WarningOverLimitConnect || ws[0].Subject != "vox/stt" || ws[0].At.IsZero() {
		t.Fatalf("warnings = %+v, %v", ws, err)
	}
}
