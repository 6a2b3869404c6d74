package capacity

import (
	"fmt"
	"testing"
)

// readAcquires reads each acquire's lease, grant and wake list, and
// refuses an answer too short for the acquires sent rather than reading
// past it (the batch then fails open).
func TestReadAcquires(t *testing.T) {
	res := []int64{-1, 0, 0, 0, 1, 2, 3, 0, 0, 4, 2, 77, 78, 1, 5, 6, 1800000090000, 0, 2, 3, 1, 250, 4, 0}
	grants, leases, err := readAcquires(res, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(grants, leases)
	want := "[{true 2 3 0 0s 4 false [77 78]} {false 2 3 1 250ms 4 false []}] [[-1 0 0 0] [1 5 6 1800000090000]]"
	if got != want {
		t.Fatalf("readAcquires = %s, want %s", got, want)
	}
	for _, cut := range []int{0, 10, 12, 23} {
		if _, _, err := readAcquires(res[:cut], 2); err == nil {
			t.Fatalf("readAcquires of the first %d values: no error", cut)
		}
	}
	if _, _, err := readAcquires([]int64{-1, 0, 0, 0, 1, 2, 3, 0, 0, 4, -1}, 1); err == nil {
		t.Fatal("readAcquires with a negative count of jobs: no error")
	}
}
