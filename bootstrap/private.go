package bootstrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/farwing/farwing/internal/privdir"
)

// This user's cache keeps what bootstrap knows between runs in farwing/ of os.UserCacheDir: the
// shared ssh connections' sockets (ssh/), the builds' gzip forms (peer/), the records of this
// executable's hash (peer/self/) and of installs (peer/installed/). Each is used only where it is
// private (internal/privdir: a directory of this user's, not a link, that no other user may
// write), and so is farwing/ above it, which could otherwise be emptied and refilled by another:
// a socket planted there would receive ssh's session (OpenSSH's mux client does not check who
// owns the master it connects to), a hash record would name another build to run on the remote,
// and a file written there could be a link to another. Where one is not private:
//   - ssh/: no connection sharing for the copy (it works as scp's would), with a notice that names
//     the directory and the fix (cacheNotice);
//   - peer/ and below: the cache is not read or written, with a notice likewise; it only saves
//     time (a hash, a compression, a guess that the remote lacks the build).

// cacheDir is base/farwing/elem... of this user's cache (os.UserCacheDir), each level made where
// it is missing (mode 0700) and checked: farwing/ with the directories above it (privdir.Make),
// each level below alone (privdir.MakeIn: the one above it was just checked). Its error wraps
// privdir.ErrNotPrivate where one of them is not private, and names it and the fix.
func cacheDir(elem ...string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(base, "farwing")
	if err := privdir.Make(dir); err != nil {
		return "", err
	}
	for _, e := range elem {
		if dir, err = privdir.MakeIn(dir, e); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// subDir is name inside dir, a cache directory cacheDir or subDir returned, made where it is
// missing and checked (privdir.MakeIn); "" where dir is "" or it is not private.
func subDir(dir, name string) string {
	if dir == "" {
		return ""
	}
	sub, err := privdir.MakeIn(dir, name)
	if err != nil {
		return ""
	}
	return sub
}

// cacheNotice is one line for each of this user's cache directories that Start will not use
// because it is not private (what it costs, which directory, the fix), none where all are: peer
// is peer/'s error, ssh ssh/'s (nil where connection sharing was not asked for): newSession's.
func cacheNotice(peer, ssh error) []string {
	var lines []string
	if errors.Is(peer, privdir.ErrNotPrivate) {
		lines = append(lines, "not using this user's cache of farwing builds: "+peer.Error())
	}
	if errors.Is(ssh, privdir.ErrNotPrivate) {
		if len(lines) > 0 && ssh.Error() == peer.Error() { // farwing/ itself: one line
			lines[0] = "not using this user's cache of farwing builds, nor sharing the ssh connection: " + ssh.Error()
		} else {
			lines = append(lines, "not sharing the ssh connection: "+ssh.Error())
		}
	}
	return lines
}

// keepFile puts b in this user's cache at p (mode 0600, renamed into place whole) and tidies p's
// directory (tidyPacked); errors are ignored: what the cache keeps only saves time. p's directory
// must be private (it is checked again here): the temporary file has a name no one can foresee
// and is made O_EXCL (os.CreateTemp), so it is never a planted file or link.
func keepFile(p string, b []byte) {
	dir := filepath.Dir(p)
	if privdir.Check(dir) != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil || os.Rename(f.Name(), p) != nil {
		os.Remove(f.Name())
	}
	tidyPacked(dir, p)
}

// tidyPacked removes from dir the files named farwing-* (compressed builds, records of this
// build's hash) made more than pruneDays ago, as installing does on the remote, except keep, and
// keepFile's temporary files left for a day.
func tidyPacked(dir, keep string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		info, err := e.Info()
		if err != nil || p == keep || !info.Mode().IsRegular() {
			continue
		}
		age := time.Since(info.ModTime())
		if strings.HasPrefix(e.Name(), "farwing-") && age > pruneDays*24*time.Hour || strings.HasPrefix(e.Name(), ".tmp-") && age > 24*time.Hour {
			os.Remove(p)
		}
	}
}

// localPeerDir is where this user's cache keeps what it knows of the peer: builds' gzip forms,
// with sub the records of this executable's hash (self) or of installs (installed). It is ""
// where there is no cache, or where it is not private (cacheDir): nothing is read from it or
// written to it then. (Start looks at each once: newSession.)
func localPeerDir(sub ...string) string {
	dir, err := cacheDir(append([]string{"peer"}, sub...)...)
	if err != nil {
		return ""
	}
	return dir
}
