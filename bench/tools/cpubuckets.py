#!/usr/bin/env python3
"""bench/tools/cpubuckets.py — where a Farwing process's CPU went, per GiB, from its CPU profile.

    python3 bench/tools/cpubuckets.py BINARY GIB PROFILE...

Reads `go tool pprof -traces` of each profile (FARWING_CPUPROFILE) and puts every sample in one
bucket by its stack: the leaf names the work (BLAKE3, AES-GCM, parity, a system call, the garbage
collector, the scheduler, a lock, memmove), the system call's caller which one (pread, sendmmsg,
recvmmsg, write). Prints CPU seconds per GiB of file (GIB: the copy's size) for each bucket, one
column per profile, and the profile's total. A system call's time is its kernel work as the Go
profiler sees it (SIGPROF counts user and system time): on a veth pair a send also runs the
receiving side of the stack up to the socket, as on loopback.
"""
import re
import subprocess
import sys

BUCKETS = [
    "BLAKE3", "AES-GCM seal/open", "parity (FEC)", "pread (page cache -> block)", "sendmmsg",
    "recvmmsg", "write/fsync (receiver)", "other system calls", "memmove/memclr (Go copies)",
    "garbage collector, allocation", "scheduler, wake-ups (futex, netpoll)", "locks",
    "framing, session, cc (Go)", "other",
]


def bucket(stack):
    leaf = stack[0]
    text = "\n".join(stack)
    if "/internal/b3." in leaf:
        return "BLAKE3"
    if "/internal/aesgcm." in leaf or "crypto/internal/fips140/aes" in leaf or "ghash" in leaf.lower():
        return "AES-GCM seal/open"
    if "reedsolomon" in text or "/fec." in text:
        return "parity (FEC)"
    if re.search(r"Syscall6?$|RawSyscall|syscall\.(Syscall|rawsyscall)", leaf) or "linux.Syscall" in leaf:
        if "pread" in text:
            return "pread (page cache -> block)"
        if "sendmmsg" in text or "sendMsgs" in text or "sendmsg" in text:
            return "sendmmsg"
        if "recvmmsg" in text or "recvmsg" in text or "recvMsgs" in text:
            return "recvmmsg"
        if "pwrite" in text or "Fsync" in text or "fdatasync" in text or "Write" in text:
            return "write/fsync (receiver)"
        return "other system calls"
    if leaf.startswith("runtime.memmove") or leaf.startswith("runtime.memclr"):
        return "memmove/memclr (Go copies)"
    if re.search(r"runtime\.(gc|scanobject|greyobject|markBits|findObject|mallocgc|sweep|bgsweep|heapBits|nextFreeFast|mSpan|mcache|mcentral|mheap|wbBuf|typePointers|spanOf)", text) and \
            not re.search(r"runtime\.(findRunnable|schedule|park_m)", leaf):
        if re.search(r"runtime\.(gcBgMarkWorker|gcDrain|mallocgc|bgsweep|gcAssist|scanobject)", text):
            return "garbage collector, allocation"
    if re.search(r"runtime\.(futex|epollwait|netpoll|usleep|osyield|nanotime|findRunnable|schedule|park_m|notesleep|notewakeup|stopm|startm|wakep|mcall|goexit|semasleep|semawakeup|procyield|runqgrab|stealWork|ready|goready|exitsyscall|entersyscall|checkTimers|runtimer|resetspinning)", text) and \
            not re.search(r"farwing/farwing/", leaf):
        # Scheduler work shows as leaves in runtime; a leaf in Farwing code under them is not.
        if leaf.startswith("runtime.") or leaf.startswith("internal/runtime") or "Syscall" in leaf:
            if re.search(r"runtime\.(lock2|unlock2)|sync\.\(\*Mutex\)|internal/sync", leaf):
                return "locks"
            return "scheduler, wake-ups (futex, netpoll)"
    if re.search(r"runtime\.(lock2|unlock2)|sync\.\(\*Mutex\)|sync\.\(\*RWMutex\)|internal/sync\.", leaf):
        return "locks"
    if "farwing/farwing/" in leaf or "farwing/farwing/" in text:
        return "framing, session, cc (Go)"
    return "other"


def parse(binary, prof):
    out = subprocess.run(["go", "tool", "pprof", "-traces", binary, prof], capture_output=True, text=True, check=True).stdout
    sums = {b: 0.0 for b in BUCKETS}
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        lines = [l for l in block.strip("\n").split("\n") if l.strip()]
        if not lines:
            continue
        m = re.match(r"\s*([0-9.]+)(ms|s|us)\s+(.*)", lines[0])
        if not m:
            continue
        v = float(m.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6}[m.group(2)]
        stack = [m.group(3).strip()] + [l.strip() for l in lines[1:]]
        sums[bucket(stack)] += v
    return sums


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, gib, profs = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    cols = [parse(binary, p) for p in profs]
    print("%-40s" % "CPU s per GiB" + "".join("%9s" % ("#%d" % (i + 1)) for i in range(len(cols))))
    for b in BUCKETS:
        if any(c[b] for c in cols):
            print("%-40s" % b + "".join("%9.3f" % (c[b] / gib) for c in cols))
    print("%-40s" % "total in the profile" + "".join("%9.3f" % (sum(c.values()) / gib) for c in cols))
    for i, p in enumerate(profs):
        print("#%d %s" % (i + 1, p))


if __name__ == "__main__":
    main()
