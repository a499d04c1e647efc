//go:build race

package lane

const raceEnabled = true
