// Package jobstest is the test support of package jobs, shared by its
// tests and by the tests of the packages that drive a pipeline (the
// metrics' rollout test): WAV files of a given length (WAV, WriteWAV,
// FileDigest), a River client wired as cmd/callscribe wires it
// (NewClient), and a pipeline against a fresh database and a speech
// simulator (Setup). It is for tests only: its helpers fail the test they
// are given rather than return errors.
package jobstest
