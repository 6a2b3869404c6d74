package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/callscribe/callscribe/ledger"
)

// FormManifests groups eligible batch recordings of tenants in manifest
// mode into manifests, by tenant, model and the manifest that sent them
// back (a resubmission carries only its predecessor's unfinished items),
// each bounded by BatchConfig.MaxItems and MaxAudioSeconds. A group is
// sent when it fills a manifest, when its oldest recording has waited
// MaxWait, or at once when it is a resubmission. Each manifest and the job
// that drives it are written in one transaction; it returns how many were
// formed.
func (p *Pipeline) FormManifests(ctx context.Context) (int, error) {
	var tenants []string
	for id := range p.cfg.Tenants {
		if p.manifestMode(id) {
			tenants = append(tenants, id)
		}
	}
	if len(tenants) == 0 {
		return 0, nil
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return 0, fmt.Errorf("forming manifests: %w", err)
	}
	bc := p.cfg.Batch
	formed := 0
	err = pgx.BeginFunc(ctx, p.pool(), func(tx pgx.Tx) error {
		formed = 0
		recs, back, err := p.ledger.BatchCandidatesTx(ctx, tx, tenants, bc.MaxItems*8)
		if err != nil {
			return err
		}
		type groupKey struct {
			tenant, model string
			back          uuid.UUID
		}
		var order []groupKey
		groups := map[groupKey][]ledger.Recording{}
		for _, r := range recs {
			k := groupKey{r.TenantID, p.modelOf(r), back[r.ID]}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], r)
		}
		now := p.cfg.Clock.Now()
		var params []river.InsertManyParams
		for _, k := range order {
			chunks := chunkManifest(groups[k], bc.MaxItems, bc.MaxAudioSeconds)
			for i, c := range chunks {
				var reason string
				switch {
				case k.back != uuid.Nil:
					reason = "resubmission: the items of manifest " + k.back.String() + " still unfinished"
				case i < len(chunks)-1 || len(c) >= bc.MaxItems:
					reason = fmt.Sprintf("full: %d items", len(c))
				case audioSeconds(c) >= bc.MaxAudioSeconds:
					reason = fmt.Sprintf("full: %.0f s of audio", audioSeconds(c))
				case now.Sub(c[0].UpdatedAt) >= bc.MaxWait:
					reason = fmt.Sprintf("the oldest item waited %s (max_wait %s)", now.Sub(c[0].UpdatedAt).Round(time.Millisecond), bc.MaxWait)
				default:
					continue // not full, not waited long enough
				}
				t := p.cfg.Tenants[k.tenant]
				prov := p.providers[k.tenant]
				nm := ledger.NewManifest{Key: manifestKey(k.tenant, prov.Name(), k.model), TenantID: k.tenant, Provider: prov.Name(),
					Model: k.model, Scope: t.Scope, Recordings: c, Reason: reason}
				if k.back != uuid.Nil {
					b := k.back
					nm.ResubmissionOf = &b
				}
				m, err := p.ledger.FormManifestTx(ctx, tx, nm)
				if err != nil {
					return err
				}
				params = append(params, river.InsertManyParams{Args: ManifestArgs{ManifestID: m.ID}})
				formed++
			}
		}
		if len(params) == 0 {
			return nil
		}
		if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
			return fmt.Errorf("enqueueing %d manifests: %w", len(params), err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("forming manifests: %w", err)
	}
	if formed > 0 {
		p.log.Info("batch lane: manifests formed", slog.Int("manifests", formed))
	}
	return formed, nil
}

// manifestKey is a new manifest's stable key.
func manifestKey(tenant, provider, model string) string {
	return fmt.Sprintf("manifest:%s:%s:%s:%s", tenant, provider, model, uuid.Must(uuid.NewV7()))
}

// modelOf is the model a recording is transcribed with.
func (p *Pipeline) modelOf(r ledger.Recording) string {
	if r.Model != "" {
		return r.Model
	}
	return p.cfg.Tenants[r.TenantID].Model
}

func audioSeconds(rs []ledger.Recording) float64 {
	var s float64
	for _, r := range rs {
		s += r.AudioDuration.Seconds()
	}
	return s
}

// chunkManifest splits rs, in order, into manifests of at most maxItems
// items and maxSeconds of audio (a single longer recording goes alone).
func chunkManifest(rs []ledger.Recording, maxItems int, maxSeconds float64) [][]ledger.Recording {
	var out [][]ledger.Recording
	var cur []ledger.Recording
	var secs float64
	for _, r := range rs {
		d := r.AudioDuration.Seconds()
		if len(cur) > 0 && (len(cur) >= maxItems || secs+d > maxSeconds) {
			out, cur, secs = append(out, cur), nil, 0
		}
		cur, secs = append(cur, r), secs+d
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}
