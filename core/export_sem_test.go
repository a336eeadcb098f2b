package core

// PermitSlot returns the stored slot key a permit (AcquirePermit) holds,
// or "" for a lock of another kind.
func PermitSlot(k *Lock) string {
	if p, ok := k.kind.(*permit); ok {
		return p.rkey
	}
	return ""
}
