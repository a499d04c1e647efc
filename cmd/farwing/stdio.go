package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/xfer"
)

// stdinName is the name a file read from standard input has where the destination is a
// directory.
const stdinName = "stdin"

// spoolStdin reads stdin (the process's standard input, which run passes down) to its end into
// a new temporary directory's file stdinName, which the copy then sends: the block plan needs the
// file's size before the first block. It returns the file's path and a function that removes it.
func spoolStdin(stdin io.Reader) (string, func(), error) {
	dir, err := os.MkdirTemp("", "farwing-stdin-")
	if err != nil {
		return "", nil, fmt.Errorf("%w: cannot make a temporary directory for standard input: %v", fcopy.ErrSource, err)
	}
	done := func() { os.RemoveAll(dir) }
	p := filepath.Join(dir, stdinName)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = io.Copy(f, stdin)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		done()
		return "", nil, fmt.Errorf("%w: cannot read standard input into %s (set TMPDIR to a place with room): %v", fcopy.ErrSource, dir, err)
	}
	os.Chmod(p, 0o644) // as a new file gets it; the receiving side's umask applies there
	return p, done, nil
}

// pullToStdout pulls paths from host into a new temporary directory, then writes the one regular
// file they bring to standard output, once it is verified and in place; the directory goes
// afterwards, whatever happens.
func pullToStdout(ctx context.Context, o xfer.Options, host string, paths []string) (*xfer.Result, error) {
	dir, err := os.MkdirTemp("", "farwing-stdout-")
	if err != nil {
		return nil, fmt.Errorf("%w: cannot make a temporary directory for the file: %v", fcopy.ErrDest, err)
	}
	defer os.RemoveAll(dir)
	res, err := xfer.Pull(ctx, o, host, paths, dir+"/")
	if err != nil {
		return nil, err
	}
	if len(res.Files) != 1 || res.Dirs+res.Symlinks+res.HardLinks > 0 || res.SkippedFiles > 0 {
		return nil, fmt.Errorf("%w: - as the destination takes one file, and the remote sent %d file(s), %d directories, %d links", fcopy.ErrDest,
			len(res.Files), res.Dirs, res.Symlinks+res.HardLinks)
	}
	f, err := os.Open(filepath.Join(dir, res.Files[0].Name))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fcopy.ErrDest, err)
	}
	defer f.Close()
	if n, err := io.Copy(stdout, f); err != nil || n != res.Files[0].Size {
		return nil, fmt.Errorf("%w: writing the file to standard output: %d of %d bytes written: %v", fcopy.ErrDest, n, res.Files[0].Size, err)
	}
	res.Files[0].Path = "-"
	return res, nil
}
