package nodeutil

import "github.com/quorumlock/quorumlock/core"

// IsAcquisition reports whether a script, given by SHA (EVALSHA) or by
// source (EVAL), is one of the protocol's acquisitions (the fenced or the
// restart-guarded one), for nodes that count acquisition attempts whatever
// their form.
func IsAcquisition(sha, source string) bool {
	for _, s := range [...]*core.Script{core.ScriptAcquireGuarded, core.ScriptAcquireFenced} {
		if sha == s.SHA() || source == s.Source() {
			return true
		}
	}
	return false
}
