package cli

// StartCPUProfile is the worker's --cpuprofile, for the bench's peer worker
// (BENCH_PEER_CPUPROFILE).
var StartCPUProfile = startCPUProfile
