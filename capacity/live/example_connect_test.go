package live_test

import (
	"context"
	"fmt"

	"github.com/callscribe/callscribe/capacity"
	"github.com/callscribe/callscribe/capacity/live"
	"github.com/callscribe/callscribe/internal/testredis"
)

// A live call takes one transcriber slot for its length, falling back when
// the primary is full, and one voice slot per reply, overflowing to a
// fallback voice with a warning on the call's timeline. The example needs
// the Redis at TEST_REDIS_URL, like the rest of the suite.
func ExampleConnectTranscriber() {
	ctx := context.Background()
	prefix := testredis.UniquePrefix("live", "ExampleConnectTranscriber")
	r, err := capacity.NewRedis(capacity.RedisConfig{URL: testredis.URL(), KeyPrefix: prefix})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	defer testredis.DeleteKeys(r.Client(), prefix)

	leases, err := capacity.New(r, capacity.Config{
		Limits: map[string]capacity.ProviderLimit{
			"deepgram/stt": {Limit: 1}, "assemblyai/stt": {Limit: 1},
			"elevenlabs/tts": {Limit: 1}, "azure/tts": {Limit: 1},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	providers := live.CallProviders{STT: []string{"deepgram", "assemblyai"}, TTS: []string{"elevenlabs", "azure"}}

	for _, call := range []string{"call-1", "call-2", "call-3"} {
		s := live.ConnectTranscriber(ctx, leases, call, providers)
		defer live.HangUp(ctx, leases, s)
		fmt.Printf("%s: transcriber %s fell back=%v over limit=%v\n", call, s.Provider, s.FellBack, s.OverLimit)
	}

	voice := live.NewVoice(leases, "call-1", providers.TTS, live.VoiceOptions{
		OnOverflow: func(e live.Event) { fmt.Printf("timeline: %s %s → %s\n", e.Kind, e.From, e.To) },
	})
	first := voice.StartReply(ctx)  // speaking…
	second := voice.StartReply(ctx) // barge-in while the first still streams
	fmt.Printf("replies: %s, %s (overflowed=%v)\n", first.Provider, second.Provider, second.Overflowed)
	first.Done()
	second.Done()
	// Output:
	// call-1: transcriber deepgram fell back=false over limit=false
	// call-2: transcriber assemblyai fell back=true over limit=false
	// call-3: transcriber deepgram fell back=false over limit=true
	// timeline: voice_overflow elevenlabs → azure
	// replies: elevenlabs, azure (overflowed=true)
}
