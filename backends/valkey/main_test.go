package valkey_test

import (
	"testing"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
