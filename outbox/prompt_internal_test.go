package outbox

import (
	"context"
	"testing"

	"github.com/callscribe/callscribe/outbox/internal/dbsqlc"
)

// Once Drain began, no place is given and no try starts: a row committed
// then gets its River job in the commit (or, reserved just before, is
// left to the adoption job), and every place taken is given back.
func TestPrompterAfterDrain(t *testing.T) {
	t.Parallel()
	p := newPrompter(&Outbox{}, 2)
	if !p.reserve() {
		t.Fatal("no place in an empty prompter")
	}
	if err := p.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.reserve() {
		t.Fatal("a place was given after Drain")
	}
	p.start(nil, dbsqlc.OutboxDeliveryGetRow{ID: 1, Scope: "crm:acme"}) // reserved before Drain: given back, no try
	p.wg.Wait()
	if n := len(p.sem); n != 0 {
		t.Fatalf("%d places still taken after Drain, want 0", n)
	}
}
