#!/usr/bin/env bash
# Syntax check of the repository's shell scripts: every *.sh under scripts/, bench/tools/ and bench/lab/ is
# parsed, not run: `sh -n` where its shebang asks for sh (#!/bin/sh, #!/usr/bin/env sh), else
# `bash -n`. One line per file, then the count; the first file that does not parse stops it with
# its name and the shell's message (exit 1).
#
# Usage: scripts/lint-sh.sh
set -euo pipefail
cd "$(dirname "$0")/.."

n=0
while IFS= read -r -d '' f; do
	first=$(head -n 1 "$f")
	case $first in
	'#!/bin/sh' | '#!/bin/sh '* | '#!/usr/bin/env sh' | '#!/usr/bin/env sh '*) shell=sh ;;
	*) shell=bash ;;
	esac
	if ! msg=$("$shell" -n "$f" 2>&1); then
		echo "lint-sh: $f: $shell -n failed:" >&2
		echo "$msg" >&2
		exit 1
	fi
	echo "$shell -n $f: ok"
	n=$((n + 1))
done < <(find scripts bench/tools bench/lab -type f -name '*.sh' -print0 | sort -z)
echo "lint-sh: $n shell files checked"
