// Package style holds tests of the repository's shape that no compiler
// checks: TestNoLongFunctions keeps every function outside tests, in every
// module of the checkout, at most 60 lines long.
package style
