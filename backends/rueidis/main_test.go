package rueidis_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

func TestMain(m *testing.M) {
	redistest.QuietRedisLogs()
	goleak.VerifyTestMain(m)
}
