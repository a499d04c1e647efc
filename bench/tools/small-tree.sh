#!/bin/bash
# small-tree.sh DIR: the small-files tree of bench/tools/small-files.sh and bench/tools/skip-tree.sh in
# DIR/tree: 100 directories of 100 random files of 4 KiB (41 MB).
set -eu
mkdir -p "$1/tree"
python3 - "$1/tree" <<'PY'
import os,sys
r=sys.argv[1]
for d in range(100):
    p=os.path.join(r,"d%02d"%d); os.makedirs(p)
    for f in range(100):
        with open(os.path.join(p,"f%03d.bin"%f),"wb") as o: o.write(os.urandom(4096))
PY
