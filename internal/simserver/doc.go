// Package simserver is the scaffold that callscribe's protocol simulators
// share (jobs/stt/sttsim for stt-http/v1, crm/crmsim for crm-webhook/v1):
// serving on a listener until a context is done with a graceful shutdown,
// writing an answer or dropping the connection with a TCP reset, Bearer
// credentials compared in constant time, latency that gives way to a
// client that leaves, a random source shared under a mutex, Retry-After
// values rounded the way a simulator states them, and ScriptedSource, the
// random source the simulators' tests script.
//
// It knows no protocol: the routes, the bodies, the error types and the
// statistics stay in each simulator. It is a leaf: it imports the standard
// library only.
package simserver
