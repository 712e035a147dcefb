// Package repo has no code of its own: its tests read the repository as
// a whole. docs/architecture.md's package map is checked against what
// each package imports, its paragraph on the hub and the relay against
// their files, its goroutine table against the files that start
// goroutines, and its lock order against the packages that check it;
// CONTRIBUTING.md's recipes against the names they give, and the
// README against the tools the bridge lists; the hub's
// files are checked to build no /ws frame; and the documentation's
// shell commands to run as written on a fresh machine and keep the
// secrets they make; README's quick start names every package CI
// installs for the tests; a test the pages name as a proof is one of
// the repository, in the package named beside it.
package repo
