module github.com/quorumlock/quorumlock/cmd/quorumlock

go 1.25.0

require (
	github.com/quorumlock/quorumlock v0.1.0
	github.com/quorumlock/quorumlock/fxmodule v0.1.0
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/gomodule/redigo v1.9.3 // indirect
	github.com/quorumlock/quorumlock/backends/valkey v0.1.0 // indirect
	github.com/redis/go-redis/v9 v9.22.0 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	github.com/valkey-io/valkey-go v1.0.79 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/dig v1.19.0 // indirect
	go.uber.org/fx v1.24.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.26.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/quorumlock/quorumlock => ../../

replace github.com/quorumlock/quorumlock/backends/valkey => ../../backends/valkey

replace github.com/quorumlock/quorumlock/fxmodule => ../../fxmodule
