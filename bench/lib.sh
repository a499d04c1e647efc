# bench/lib.sh — set-up shared by the lab scripts (sourced, not run).

# bench_work NAME FILE SIZE makes a scratch directory (removed on exit) holding a static farwing
# built from this checkout, a random file FILE of SIZE (head -c syntax, e.g. 256M) and an empty
# file (copied first to install the peer), all readable by the lab's throwaway user, and exports
# F (the binary) and W (the directory).
bench_work() {
	W=$(mktemp -d "/tmp/farwing-$1.XXXXXX")
	trap 'rm -rf "$W"' EXIT
	chmod 755 "$W"
	CGO_ENABLED=0 go build -o "$W/farwing" ./cmd/farwing
	head -c "$3" /dev/urandom >"$W/$2"
	: >"$W/empty"
	chmod 644 "$W/$2" "$W/empty"
	F="$W/farwing"
	export F W
}
