//go:build race

package testrace

const raceEnabled = true
