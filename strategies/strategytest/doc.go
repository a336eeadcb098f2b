// Package strategytest is the conformance suite for quorum strategies: any
// implementation of strategies.Strategy, built in or the user's own, can run
// it from a test with fake attempts and no Redis.
//
//	func TestMyStrategy(t *testing.T) {
//		strategytest.Run(t, strategytest.Spec{
//			New:        func() strategies.Strategy { return MyStrategy() },
//			Concurrent: true,
//		})
//	}
package strategytest
