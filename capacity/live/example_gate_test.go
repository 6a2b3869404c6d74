package live_test

import (
	"context"
	"fmt"

	"github.com/callscribe/callscribe/capacity/live"
)

// The gate admits Size calls at once, below the smallest per-call pool.
func ExampleGate() {
	gate, err := live.NewGate(live.GateConfig{Size: 1, Ceilings: map[string]int{"db_pool": 40, "stt_sockets": 100}, Timeout: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	release, err := gate.Enter(context.Background())
	fmt.Println("1st call:", err)
	_, err = gate.Enter(context.Background())
	fmt.Println("2nd call:", err, "- rejected:", gate.Rejected())
	release()

	_, err = live.NewGate(live.GateConfig{Size: 40, Ceilings: map[string]int{"db_pool": 40, "stt_sockets": 100}})
	fmt.Println(err)
	// Output:
	// 1st call: <nil>
	// 2nd call: no room among 1 calls after 0s: capacity: admission gate full - rejected: 1
	// GateConfig.Size 40 must be below the smallest ceiling, db_pool = 40
}
