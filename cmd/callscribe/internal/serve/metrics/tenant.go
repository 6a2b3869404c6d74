package metrics

import "sync"

// OtherTenant is the tenant label of every tenant past the first
// MaxTenantLabels seen.
const OtherTenant = "other"

// TenantLabels bounds a tenant label: the first Max distinct tenants it is
// asked about keep their id, every later one is OtherTenant. It is safe
// for concurrent use. Which tenants keep their name depends on the order a
// process first sees them: a tenant may be named in one process and
// "other" in another when there are more than Max.
type TenantLabels struct {
	max   int
	mu    sync.Mutex
	named map[string]struct{}
}

// NewTenantLabels returns a TenantLabels keeping max names (0 or
// negative: none, every tenant is OtherTenant).
func NewTenantLabels(max int) *TenantLabels {
	return &TenantLabels{max: max, named: map[string]struct{}{}}
}

// Label returns tenant's label: its id while fewer than Max tenants were
// named before it, else OtherTenant. The empty tenant is OtherTenant.
func (t *TenantLabels) Label(tenant string) string {
	if tenant == "" {
		return OtherTenant
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.named[tenant]; ok {
		return tenant
	}
	if len(t.named) >= t.max {
		return OtherTenant
	}
	t.named[tenant] = struct{}{}
	return tenant
}
