# First contact (bootstrap.peerScript): start the cached peer for this host's platform, or receive
# it, check its SHA-256 and start it. A text/template; what it is given is in peerScriptData.
# shellcheck disable=SC2015 # "check && check || b": b (a bad upload) exits, meant whenever any check fails
{{.Hash}}
{{.Priv}}
f() { [ -x "$B" ] && [ ! -L "$B" ] && [ -O "$B" ] && h "$B" && [ "$hv" = "$H" ]; }
s0=$PWD
d="${XDG_CACHE_HOME:-$HOME/.cache}/farwing"
case $d in /*) ;; *) d="$s0/$d";; esac
s=$(uname -s -m); m=${s##* }; s=${s%% *}
# B is the name in the cache directory of the build for this platform, H its SHA-256.
case "$s/$m" in
{{range .Builds}}{{.Patterns}}) B=farwing-{{.H16}}; H={{.Hash}};;
{{end}}*) echo "FARWING-PEER need $s $m raw $d"; exit 0;;
esac
# An intact cached peer starts at once: it prints the status line itself (--announce) and drops
# the bytes written ahead after the preface (--skip PREFACE:AHEAD).
if v "$d" && f; then
  exec env "./$B" serve {{.Announce}} "$d/$B" {{.Chdir}} "$s0" {{.Serve}}{{if .AheadLen}} --skip {{.PrefaceLen}}:{{.AheadLen}}{{end}}
fi
# shellcheck disable=SC2174 # -m applies to the cache directory itself, the one that must be private
[ -e "$d" ] || [ -L "$d" ] || mkdir -m 700 -p "$d" 2>/dev/null
if ! v "$d"; then
  if [ "$c" = nodir ]; then echo "FARWING-PEER nodir $s $m $d"; else echo "FARWING-PEER unsafe $s $m $c $d"; fi
  exit 0
fi
[ -w . ] || { echo "FARWING-PEER nodir $s $m $d"; exit 0; }
h /dev/null; [ "$hv" = {{.Empty}} ] || { echo "FARWING-PEER nohash $s $m $d"; exit 0; }
{{.Read}}
{{if .PrefaceLen}}r {{.PrefaceLen}} >/dev/null
{{end}}# z: the formats this host can unpack, the best first (xz's x86 filter is in every xz).
z=raw; command -v gzip >/dev/null 2>&1 && z=gzip,raw
command -v xz >/dev/null 2>&1 && z=xz,$z
# The bytes ahead are the guessed build's upload in {{.AheadFormat}} form: of no use without
# {{.AheadFormat}}, or to a remote of another platform.
{{if .AheadLen}}case ",$z," in *,{{.AheadFormat}},*) [ "$B" = farwing-{{.Guess}} ];; *) false;; esac || r {{.AheadLen}} >/dev/null
{{end}}echo "FARWING-PEER need $s $m $z $d"
q=
# b gives up: the unpacker (if one runs) is stopped first, so that no file of its appears after the rm.
b() { if [ -n "${g-}" ]; then exec 3>&-; wait "$g"; fi; [ -z "$q" ] || rm -f "$q".*.tmp; echo "FARWING-PEER badupload"; exit 0; }
k() { case "$1" in ''|0?*|*[!0-9]*|???????????*) return 1;; esac; }
read -r w f n i || exit 0
case "$w:$f" in FARWING-UPLOAD:xz|FARWING-UPLOAD:gzip|FARWING-UPLOAD:raw) ;; *) b;; esac
k "$n" && [ "$n" -gt 0 ] || b
case "$i" in ????????????????) ;; *) b;; esac
case "$i" in *[!0-9a-f]*) b;; esac
q=".$B.$i"
u=$(umask); umask 077
j=
# The parts are unpacked as they come, where they come in order (as the main session sends them):
# each one stored is also written to an unpacker running meanwhile, through a pipe (fd 3); p is
# the offset up to which it was given them (-1: it is not running: raw, no mkfifo, or a part out of
# order, where its input was closed), g its process ("": none was started).
p=-1; g=
if [ "$f" != raw ] && mkfifo "$q.pipe.tmp" 2>/dev/null; then
  { if [ "$f" = xz ]; then xz -dc; else gzip -dc; fi; } <"$q.pipe.tmp" >"$q.out.tmp" 2>/dev/null &
  g=$!
  exec 3>"$q.pipe.tmp"
  p=0
fi
while read -r w a; do
  case "$a" in *[!0-9\ -]*) b;; esac
  # shellcheck disable=SC2086 # split into its numbers, which the case above checked
  set -- $a
  case "$w" in
  FARWING-PART)
    [ $# -eq 2 ] && k "$1" && k "$2" && [ "$2" -gt 0 ] && [ $(($1 + $2)) -le "$n" ] || b
    r "$2" >"$q.$1-$2.tmp"
    echo "FARWING-GOT $1 $2"
    if [ "$p" -ge 0 ]; then
      if [ "$1" -eq "$p" ] && cat "$q.$1-$2.tmp" >&3; then p=$(($1 + $2)); else exec 3>&-; p=-1; fi
    fi;;
  FARWING-JOIN)
    o=0; e=
    for x; do
      y=${x%-*}; l=${x#*-}
      [ "$x" = "$y-$l" ] && k "$y" && k "$l" && [ "$y" -eq "$o" ] && [ "$l" -gt 0 ] || b
      o=$((y + l)); [ "$o" -le "$n" ] || b
      [ -f "$q.$x.tmp" ] || e="$e $x"
    done
    [ "$o" -eq "$n" ] || b
    [ -n "$e" ] || { j=1; break; }
    echo "FARWING-MISSING$e";;
  *) b;;
  esac
done
[ -n "$j" ] || { rm -f "$q".*.tmp; exit 0; }
# The working directory is private (v): no other user can have left a file or a link at the
# parts' names or at $t, and none can change what these names lead to.
t=".$B.$$.tmp"
for x; do set -- "$@" "$q.$x.tmp"; shift; done
# What the unpacker made is the build where it was given every byte, in order, and has the
# build's SHA-256; otherwise the parts named in the join are unpacked now.
hv=
if [ -n "$g" ]; then
  exec 3>&-
  wait "$g" && [ "$p" -eq "$n" ] && mv -f "$q.out.tmp" "$t" && h "$t"
fi
if [ "$hv" != "$H" ]; then
  case $f in
  xz) cat "$@" | xz -dc >"$t" 2>/dev/null;;
  gzip) cat "$@" | gzip -dc >"$t" 2>/dev/null;;
  *) cat "$@" >"$t";;
  esac
  h "$t"
fi
rm -f "$q".*.tmp
umask "$u"
if [ "$hv" != "$H" ]; then rm -f "$t"; echo "FARWING-PEER badhash"; exit 0; fi
chmod 755 "$t" && mv -f "$t" "$B" || { rm -f "$t"; echo "FARWING-PEER norename"; exit 0; }
find . -maxdepth 1 -type f \( -name 'farwing-*' -mtime +{{.PruneDays}} -o -name '.farwing-*.tmp' -mtime +1 \) ! -name "$B" -exec rm -f {} + 2>/dev/null
echo "FARWING-PEER ok $s $m $d/$B"
exec env "./$B" serve {{.Chdir}} "$s0" {{.Serve}}
