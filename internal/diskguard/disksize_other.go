//go:build !(linux || darwin)

package diskguard

// osDiskSize is not measured on this OS: the headroom is used as configured.
func osDiskSize(string) (int64, bool) { return 0, false }
