package core

// SetKeeperAddHook makes f run as the keeper starts adding a lock, until
// the returned function restores the previous hook.
func SetKeeperAddHook(f func()) (restore func()) {
	prev := testHookKeeperAdd
	testHookKeeperAdd = f
	return func() { testHookKeeperAdd = prev }
}
