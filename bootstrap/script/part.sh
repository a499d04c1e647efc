# An extra upload connection (bootstrap.partScript): store exactly N bytes of the input as a part
# file of upload Q in the private cache directory DIR, and say so. A text/template.
umask 077
{{.Priv}}
v {{.Dir}} || exit 1
q={{.Q}}
t="$q.{{.Part}}.$$.tmp"
{{.Read}}
# shellcheck disable=SC2015 # any failure, of r, the count or mv, removes $t and exits 1
r {{.N}} >"$t" &&
[ $(($(wc -c <"$t"))) -eq {{.N}} ] && mv -f "$t" "$q.{{.Part}}.tmp" && echo "FARWING-STORED {{.Part}}" || { rm -f "$t"; exit 1; }
