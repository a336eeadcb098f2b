// Package report holds the records of lockbench's measurements and writes
// them as markdown: one table per mode, with rows (nodes, system) and each
// metric's runs side by side, notes on what went wrong, and the Targets
// section, which compares quorumlock with its floors and peers, and in the
// degraded modes with itself in the healthy mode, from the mean of the
// runs and marks each goal PASS or FAIL.
package report
