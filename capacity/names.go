package capacity

// The names capacity stores in Redis and reports: the kinds of vendor
// stream a lease counts (Request.Kind), the states of a caller ID
// (CallerIDState.State) and the kinds of warning (Warning.Kind).
const (
	KindSTT = "stt" // a transcriber stream
	KindTTS = "tts" // a voice (speech synthesis) stream

	CallerIDFree  = "free"
	CallerIDBusy  = "busy"
	CallerIDStale = "stale" // busy for StaleAfter or longer: the next acquire takes it back

	// WarningOverLimitConnect: every STT provider of a call was full; the
	// call connected to its primary uncounted, and the vendor may refuse it.
	WarningOverLimitConnect = "over-limit-connect"
)
