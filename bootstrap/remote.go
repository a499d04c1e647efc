package bootstrap

import (
	"fmt"
	"strings"
)

// Any login shell. sshd hands the command line it is given to the account's login shell (`$SHELL
// -c LINE`), which may be sh, bash, dash, zsh or ksh, but also fish, csh or tcsh, where a multi-line
// `sh -c '…'` is not valid: csh allows no newline inside quotes and expands `!` even inside single
// quotes; fish has its own syntax. So the command line is one that each of them reads the same way
// (remoteCommand): `exec sh -c '…'`, whose single-quoted argument has sh print the script with
// printf's %b and run it. Inside the quotes are only letters, digits and punctuation that none of
// those shells treats specially there; every other byte of the script (newline, `!`, quotes, `$`,
// backslash, …) is written as %b's octal escape `\0NNN` (a backslash and digits: csh's single quotes
// keep a backslash but before `!` or a newline, fish's but before `\` or `'`).
//
// The script travels in the exec request itself: sshd opens the session's input only once the
// command runs, so a script sent on it would start a round trip later.

// remoteCommand is the command line given to ssh that runs script with sh.
func remoteCommand(script string) string {
	return `exec sh -c 'eval "$(printf "%b" "` + escapeForPrintf(script) + `")"'`
}

// keptAsIs are the bytes escapeForPrintf leaves as they are: inside sh's double quotes, csh's,
// tcsh's, fish's and POSIX shells' single quotes and printf's %b, none of them means anything.
const keptAsIs = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;=+-_/|&(){}[]<>*?#@~"

// escapeForPrintf writes every byte of s that is not in keptAsIs as printf %b's `\0NNN`.
func escapeForPrintf(s string) string {
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		if c := s[i]; strings.IndexByte(keptAsIs, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, `\0%03o`, c)
		}
	}
	return b.String()
}
