// Package unlinked tests fxmodule in a program that imports no driver
// package, which fxmodule's own tests, linking every driver, cannot.
package unlinked

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/fxmodule"
)

// A driver whose package the program did not import fails the start with
// an error that names the package, and dials nothing.
func TestUnlinkedDriverNamesItsPackage(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, d := range []string{fxmodule.DriverGoRedis, fxmodule.DriverRedigo, fxmodule.DriverRueidis, fxmodule.DriverValkey, ""} {
		app := fx.New(fx.NopLogger, fxmodule.Module,
			fx.Supply(fxmodule.Config{Driver: d, Addrs: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}}),
			fx.Invoke(func(*core.Locker) {}))
		want := d
		if want == "" {
			want = fxmodule.DefaultDriver
		}
		require.ErrorContains(t, app.Err(), `import _ "github.com/quorumlock/quorumlock/fxmodule/`+want+`"`, "driver %q", d)
	}
}
