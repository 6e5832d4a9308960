// Package house holds the tests that keep the house's rules, each over
// the whole module: every command one shape and every flag name one
// meaning (shape_test.go), every connection through one seam
// (seam_test.go), every rule documented, proved and in a file of its own,
// every command with its guide (registry_test.go), functions short enough
// to read (functions_test.go). CONTRIBUTING.md says what each rule asks.
package house
