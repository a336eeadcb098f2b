package fxmodule

import "github.com/quorumlock/quorumlock/core"

// BuildNodes exposes buildNodes to the external tests.
func BuildNodes(c Config) ([]core.Node, error) { return buildNodes(&c) }
