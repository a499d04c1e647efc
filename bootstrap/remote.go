package bootstrap

import "strings"

// Any login shell. sshd hands the command line it is given to the account's login shell (`$SHELL
// -c LINE`), which may be sh, bash, dash, zsh or ksh, but also fish, csh or tcsh, where a multi-line
// `sh -c '…'` is not valid: csh allows no newline inside quotes and expands `!` even inside single
// quotes; fish has its own syntax. So the command line is one that each of them reads the same way:
// remoteCommand, one line with a single-quoted argument holding no newline, `!`, `'` or `\` but
// `\n` (literal for all of them inside single quotes: fish's only escapes there are `\\` and
// `\'`, csh's `\!` and a backslash-newline), which has sh read the script itself from the session's
// first lines, up to the line scriptEnd, with its read builtin (which reads no byte past the
// line's end: what follows is the control channel's preface, an upload, or a part's bytes), and
// run it. A script cut short (the connection lost) is not run.

// scriptEnd is the line that ends the script on the session's input.
const scriptEnd = "FARWING-SCRIPT-END"

// remoteCommand is the command line given to ssh for every remote script.
const remoteCommand = `exec sh -c 'n=$(printf "\nx"); n=${n%x}; s=; g=; ` +
	`while IFS= read -r l; do [ "$l" = ` + scriptEnd + ` ] && { g=1; break; }; s="$s$n$l"; done; [ -n "$g" ] && eval "$s"'`

// scriptInput is script as it goes first on the session's input: its lines, then scriptEnd.
func scriptInput(script string) []byte {
	return []byte(strings.TrimSuffix(script, "\n") + "\n" + scriptEnd + "\n")
}
