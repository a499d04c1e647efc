# h FILE sets hv to the file's SHA-256 (lower-case hex) with whichever tool the remote has,
# OpenSSL first (it uses the CPU's SHA instructions where coreutils' sha256sum may not); every tool
# prints the digest first, up to a space, which the shell's own expansion takes (no cut process).
h() { hv=$(openssl dgst -sha256 -r "$1" 2>/dev/null || sha256sum "$1" 2>/dev/null || shasum -a 256 "$1" 2>/dev/null || sha256 -q "$1" 2>/dev/null); hv=${hv%% *}; }
