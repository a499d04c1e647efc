# v DIR enters DIR (cd -P) and succeeds where it is private: not a symbolic link, a directory whose
# physical name is farwing (as every cache directory's is: no link swapped in after the check leads
# elsewhere), owned by this user (test -O .), neither group- nor other-writable (the 6th and 9th
# characters of ls -ld's mode string: POSIX's format, as BSD's and macOS's ls print it too).
# Otherwise it sets c to why: link, nodir (missing, not a directory, or not to be entered), owner or
# mode (a mode that allows others to write, or that ls did not print). What it checks is the
# working directory, not a path: from then on the scripts name what they keep or run relative to
# it, so another user who can write a directory above it (a group-writable ~/.cache) and renames it
# away and puts one of theirs at its name changes nothing they read, write or run; and no one else
# can plant a file, a link or another build at the names used inside (test -O and -L are the
# shell's own, and cd; ls is the one process it costs).
v() {
  c=
  if [ -L "$1" ]; then
    c='link'
  elif ! cd -P "$1" >/dev/null 2>&1; then
    c='nodir'
  else
    case $PWD in
    */farwing)
      if [ ! -O . ]; then
        c='owner'
      else
        case $(ls -ld . 2>/dev/null) in d????w*|d???????w*) c='mode';; d*) ;; *) c='mode';; esac
      fi;;
    *) c='link';;
    esac
  fi
  [ -z "$c" ]
}
