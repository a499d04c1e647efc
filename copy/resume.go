package copy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Crash-safe resume. A file being received is a temporary file next to its destination
// (".NAME.farwing-RANDOM.part", dest.go); every checkpointEvery bytes (or
// WriterOptions.CheckpointEvery) the writer syncs its data and then writes, atomically, a small
// record beside it (".NAME.farwing-RANDOM.rec"): the source's identity as the file list gave it
// (size, mtime, device and inode on the sending side, the whole-file BLAKE3 when the list carries
// it), the block size and how many blocks from the start of the file are verified and durable. A
// copy that dies (either end killed, ssh gone) leaves both. The next copy of the same source to the
// same name finds them, offers the kept blocks (Offer), and keeps them only if every one of them
// matches the digest the sender computes from its source now (HashPrefixes, Partials.Verify): a
// record is never trusted for the bytes. A record that is unreadable, of another version or of
// another source means "start over": the partial and its record are removed. Kept partials are
// removed by --no-resume (RemovePartials) and by the housekeeping once their record is a week old
// (sweepEntry).

// recordVersion is the resume record's format version.
const recordVersion = 1

// maxRecord bounds a record's size.
const maxRecord = 4096

// checkpointEvery is how much of a file the writer receives between checkpoints: a data sync of
// the partial file, then its record (unless WriterOptions.CheckpointEvery says otherwise);
// checkpointGap the least time between two, which bounds their cost on a fast path (at
// 400 Mbit/s 64 MiB take 1.3 s; on loopback, 10 Gbit/s, a second is 1.2 GB that a crash would
// make the next copy send again).
const (
	checkpointEvery = 64 << 20
	checkpointGap   = time.Second
)

// resumeKeep is how long a partial file with a record is kept for a resume.
const resumeKeep = 7 * 24 * time.Hour

// MaxOfferBlocks bounds the blocks of one file offered for a resume (1 TiB): their digests
// travel in one control message.
const MaxOfferBlocks = 1 << 20

const (
	partSuffix = ".part"
	recSuffix  = ".rec"
	rtmpSuffix = ".rtmp" // a record being written
)

// record is the content of a resume record.
type record struct {
	V         int    `json:"farwing_resume"`
	Name      string `json:"name"` // the destination's base name
	Size      int64  `json:"size"`
	MTime     int64  `json:"mtime"`
	Dev       uint64 `json:"dev"`
	Ino       uint64 `json:"ino"`
	Sum       string `json:"blake3,omitempty"`
	BlockSize int    `json:"block_size"`
	Blocks    uint32 `json:"blocks"`   // verified and durable from the start of the file
	PartIno   uint64 `json:"part_ino"` // the partial file's own inode
}

func newRecord(base string, f File) record {
	return record{V: recordVersion, Name: base, Size: f.Size, MTime: f.MTime, Dev: f.Dev, Ino: f.Ino, Sum: f.Sum, BlockSize: BlockSize}
}

// parseRecord reads a record; anything but a complete, well-formed record of this version is
// an error (the caller starts over).
func parseRecord(b []byte) (record, error) {
	var r record
	if len(b) > maxRecord {
		return r, errors.New("resume record too long")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("resume record unreadable: %v", err)
	}
	switch {
	case r.V != recordVersion:
		return r, fmt.Errorf("resume record of version %d (this build reads %d)", r.V, recordVersion)
	case r.BlockSize != BlockSize:
		return r, fmt.Errorf("resume record of block size %d", r.BlockSize)
	case r.Size < 0 || uint64(r.Blocks) > blocksOf(r.Size) || r.Blocks > MaxOfferBlocks:
		return r, fmt.Errorf("resume record of %d blocks for %d bytes", r.Blocks, r.Size)
	case r.Name == "" || strings.ContainsRune(r.Name, '/') || ValidName(r.Name) != nil:
		return r, errors.New("resume record without a valid name")
	}
	return r, nil
}

// matches says whether the record was written for the source f: same size, mtime, device and
// inode, and the same whole-file digest where both know one.
func (r record) matches(base string, f File) bool {
	return r.Name == base && r.Size == f.Size && r.MTime == f.MTime && r.Dev == f.Dev && r.Ino == f.Ino &&
		(r.Sum == "" || f.Sum == "" || r.Sum == f.Sum)
}

// stem is a temporary name without its suffix: ".NAME.farwing-RANDOM".
func stem(name, suffix string) (string, bool) {
	s, ok := strings.CutSuffix(name, suffix)
	if !ok || !strings.HasPrefix(s, ".") {
		return "", false
	}
	i := strings.LastIndex(s, partMarker)
	if i < 1 || len(s)-i-len(partMarker) != 12 {
		return "", false
	}
	for _, c := range s[i+len(partMarker):] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return "", false
		}
	}
	return s, true
}

// stemPrefix is the start of the stems of base's temporary names (partName).
func stemPrefix(base string) string {
	p := partName(base)
	return p[:len(p)-len(partSuffix)-12]
}

// readRecordAt reads the record name in dirfd: a regular file of this user, one link, not
// through a link, at most maxRecord bytes.
func readRecordAt(dirfd int, name string) (record, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return record{}, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return record{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || int(st.Uid) != os.Geteuid() || st.Size > maxRecord {
		return record{}, errors.New("resume record is not a plain file of this user")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return record{}, err
	}
	return parseRecord(b)
}

// writeRecordAt writes r as the record of the temporary file part in dirfd: to a temporary
// record, synced, renamed over the record, and the directory synced, so that a crash leaves the
// old record or the new one, never a part of one. The temporary record's name can be guessed
// from the partial file's, in a directory others may write: it is created new (O_EXCL, never
// through a link, never blocking on a FIFO), and whatever stands at its name (a record a crash
// left, or something planted: a FIFO, a hard link to another file) is unlinked first, never
// opened; what cannot be unlinked (another user's, in a sticky directory) fails the checkpoint.
func writeRecordAt(dirfd int, part string, r record) error {
	s := strings.TrimSuffix(part, partSuffix)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	const flags = unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, s+rtmpSuffix, flags, 0o600)
	if errors.Is(err, unix.EEXIST) && unix.Unlinkat(dirfd, s+rtmpSuffix, 0) == nil {
		fd, err = unix.Openat(dirfd, s+rtmpSuffix, flags, 0o600)
	}
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, b)
	if err == nil {
		err = unix.Fsync(fd)
	}
	unix.Close(fd)
	if err == nil {
		err = unix.Renameat(dirfd, s+rtmpSuffix, dirfd, s+recSuffix)
	}
	if err != nil {
		unix.Unlinkat(dirfd, s+rtmpSuffix, 0)
		return err
	}
	return unix.Fsync(dirfd)
}

// removeRecordAt removes the record (and a record being written) of the temporary file part.
func removeRecordAt(dirfd int, part string) {
	s := strings.TrimSuffix(part, partSuffix)
	unix.Unlinkat(dirfd, s+recSuffix, 0)
	unix.Unlinkat(dirfd, s+rtmpSuffix, 0)
}

// sweepEntry is the housekeeping of one temporary name in dirfd whose writer may be dead: an
// unlocked partial file is removed unless its record is younger than resumeKeep; a record or a
// record being written whose partial is gone, or unlocked and to be removed, goes with it. It
// reports whether it removed a partial file.
func sweepEntry(dirfd int, name string) bool {
	if s, ok := stem(name, recSuffix); ok {
		if !partExists(dirfd, s+partSuffix) {
			unix.Unlinkat(dirfd, name, 0)
		} else if !recordYoung(dirfd, name) && removeIfStale(dirfd, s+partSuffix) {
			unix.Unlinkat(dirfd, name, 0)
			return true
		}
		return false
	}
	if s, ok := stem(name, rtmpSuffix); ok {
		if !partExists(dirfd, s+partSuffix) || partFree(dirfd, s+partSuffix) {
			unix.Unlinkat(dirfd, name, 0)
		}
		return false
	}
	if !isPart(name) {
		return false
	}
	s := strings.TrimSuffix(name, partSuffix)
	if recordYoung(dirfd, s+recSuffix) {
		return false // kept for a resume
	}
	if removeIfStale(dirfd, name) {
		removeRecordAt(dirfd, name)
		return true
	}
	return false
}

// recordYoung says whether name in dirfd is a regular file modified less than resumeKeep ago.
func recordYoung(dirfd int, name string) bool {
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	return time.Since(time.Unix(st.Mtim.Unix())) < resumeKeep
}

func partExists(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// partFree says whether the temporary file name in dirfd is a regular file no writer holds.
func partFree(dirfd int, name string) bool {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil
}

// Offer is a receiver's offer to resume a file: the index of a regular file of the list and the
// blocks from its start that an interrupted copy left verified and durable.
type Offer struct {
	File   int    `json:"file"`
	Blocks uint32 `json:"blocks"`
}

// partial is a kept partial file found for file idx of the list: open, locked.
type partial struct {
	idx     int
	f       *os.File
	dir     string // relative to the target's root
	base    string
	tmp     string // its name in dir
	rec     record
	sums    []byte    // this end's digests of its kept blocks (Partials.Hash), 32 bytes each
	tree    *fileTree // the file's tree state after them
	checked bool      // the sender's digests came (Verify)
	kept    bool      // and matched: its blocks are kept
}

// Partials are the kept partial files a receiver found for a copy.
type Partials struct {
	parts  []*partial // ascending idx
	hashed chan error // closed (after err is set) once hash is done
	err    error
	plan   *Plan
}

// FindPartials looks, below the target, for the kept partial files of the regular files of
// files not in have: each directory opened without following links, the partial and its
// record regular files of this user with one link, the record one of this version whose source
// is the list's. Those found are opened and locked (another copy writing them now is left
// alone); what cannot be resumed (another source, an unreadable record or one of another
// version, a partial that is not the record's) is removed. remove (--no-resume) removes every
// one found and returns none.
func (t *Target) FindPartials(files []File, have []int, remove bool) *Partials {
	ps := &Partials{}
	skip := map[int]bool{}
	for _, i := range have {
		skip[i] = true
	}
	listed := map[string][]string{} // directory → its temporary-record names
	// The directory stays open while the list's entries stay in it (have does the same): a tree
	// of 100,000 files is not 100,000 walks.
	t.eachDir(files, func(i, fd int, dir, base string) {
		if skip[i] || files[i].Size == 0 {
			return
		}
		names, ok := listed[dir]
		if !ok {
			names = recordNames(fd)
			listed[dir] = names
		}
		if p := findPartial(fd, filepath.Join(t.root, filepath.FromSlash(dir)), names, base, files[i], remove); p != nil {
			p.idx, p.dir, p.base = i, dir, base
			ps.parts = append(ps.parts, p)
		}
	})
	return ps
}

// recordNames lists the names of records in the directory dirfd.
func recordNames(dirfd int) []string {
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	var out []string
	for {
		names, err := f.Readdirnames(1024)
		for _, n := range names {
			if _, ok := stem(n, recSuffix); ok {
				out = append(out, n)
			}
		}
		if err != nil || len(names) == 0 {
			return out
		}
	}
}

// findPartial picks the kept partial of base (the file f) among the records names in dirfd:
// the one with the most blocks; the others of base are removed (if no writer holds them).
func findPartial(dirfd int, dirPath string, names []string, base string, f File, remove bool) *partial {
	prefix := stemPrefix(base)
	exact := len(prefix) == len("."+base+partMarker) // the name is not cut: every stem of prefix is base's
	var best *partial
	for _, n := range names {
		s, _ := stem(n, recSuffix)
		if !strings.HasPrefix(s, prefix) || len(s) != len(prefix)+12 {
			continue
		}
		part := s + partSuffix
		rec, err := readRecordAt(dirfd, n)
		if err == nil && rec.Name != base {
			continue // another long name's
		}
		if err != nil && !exact {
			continue // cannot tell whose it is: the week's sweep removes it
		}
		if err != nil || remove || !rec.matches(base, f) || rec.Blocks == 0 {
			dropPartial(dirfd, part)
			continue
		}
		p := openPartial(dirfd, dirPath, part, rec, f)
		if p == nil {
			if partFree(dirfd, part) || !partExists(dirfd, part) {
				dropPartial(dirfd, part)
			}
			continue
		}
		if best != nil && best.rec.Blocks >= p.rec.Blocks {
			p.f.Close()
			dropPartial(dirfd, part)
			continue
		}
		if best != nil {
			best.f.Close()
			dropPartial(dirfd, best.tmp)
		}
		best = p
	}
	return best
}

// dropPartial removes the temporary file part in dirfd and its record, unless a writer holds it.
func dropPartial(dirfd int, part string) {
	if !partExists(dirfd, part) || removeIfStale(dirfd, part) {
		removeRecordAt(dirfd, part)
	}
}

// openPartial opens and locks the partial part in dirfd (at dirPath) for rec: a regular file of
// this user with one link, of f's size, the inode the record names, not held by another writer,
// and still at its name once locked.
func openPartial(dirfd int, dirPath, part string, rec record, f File) *partial {
	fd, err := unix.Openat(dirfd, part, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || int(st.Uid) != os.Geteuid() ||
		st.Size != f.Size || uint64(st.Ino) != rec.PartIno || !lockedAt(fd, dirfd, part) {
		unix.Close(fd)
		return nil
	}
	unix.SetNonblock(fd, false)
	return &partial{f: os.NewFile(uintptr(fd), filepath.Join(dirPath, part)), tmp: part, rec: rec}
}

// RemovePartials (--no-resume) removes the kept partial files of the regular files of files.
func (t *Target) RemovePartials(files []File) {
	t.FindPartials(files, nil, true)
}

// Offers lists what the receiver offers to keep, ascending by file.
func (ps *Partials) Offers() []Offer {
	if ps == nil {
		return nil
	}
	var o []Offer
	for _, p := range ps.parts {
		o = append(o, Offer{File: p.idx, Blocks: p.rec.Blocks})
	}
	return o
}

// Hash computes this end's digests of the offered blocks (in the background: Verify waits),
// hashed as the transfer hashes them (plan: the list's plan).
func (ps *Partials) Hash(plan *Plan) {
	ps.plan = plan
	ps.hashed = make(chan error)
	go func() {
		defer close(ps.hashed)
		for _, p := range ps.parts {
			sums, tree, err := hashPrefix(p.f, p.rec.Blocks, plan.Files[p.idx].Size)
			if err != nil {
				ps.err = err
				return
			}
			p.sums, p.tree = sums, tree
		}
	}()
}

// hashPrefix returns the block digests (32 bytes each) of the first n blocks of the file r of
// size bytes, and its tree state after them.
func hashPrefix(r io.ReaderAt, n uint32, size int64) ([]byte, *fileTree, error) {
	sums := make([]byte, 0, 32*int(n))
	tree := &fileTree{}
	err := eachBlock(r, size, 0, n, func(_ uint32, s *BlockSum) {
		d := s.Digest()
		sums = append(sums, d[:]...)
		tree.add(s)
	})
	if err != nil {
		return nil, nil, err
	}
	return sums, tree, nil
}

// Verify compares this end's digests of the blocks offered for file with the sender's (digests:
// 32 bytes per block, as many as offered). A file whose every offered block matches is kept;
// one with any block that differs starts over (the source or the partial changed: nothing is
// spliced). It is an error (the sender's) when digests is not for an offered file or not of
// the length offered.
func (ps *Partials) Verify(ctx context.Context, file int, digests []byte) error {
	select {
	case <-ps.hashed:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	var p *partial
	for _, q := range ps.parts {
		if q.idx == file {
			p = q
		}
	}
	if p == nil {
		return fmt.Errorf("block digests for file %d, which was not offered", file)
	}
	if p.checked {
		return fmt.Errorf("block digests for file %d a second time", file)
	}
	if len(digests) != 32*int(p.rec.Blocks) {
		return fmt.Errorf("%d bytes of block digests for file %d, offered %d blocks", len(digests), file, p.rec.Blocks)
	}
	p.checked = true
	if ps.err != nil {
		return nil // this end cannot read its partial files: none is kept
	}
	if !bytes.Equal(p.sums, digests) {
		return nil
	}
	p.kept = true
	return nil
}

// Kept lists, for every offer, the blocks kept: all offered or none.
func (ps *Partials) Kept() []Offer {
	var o []Offer
	for _, p := range ps.parts {
		k := Offer{File: p.idx}
		if p.kept {
			k.Blocks = p.rec.Blocks
		}
		o = append(o, k)
	}
	return o
}

// Apply takes the kept files' blocks out of plan, with the tree state of this end's own
// digests of them. The partial files of the files that start over are removed.
func (ps *Partials) Apply(plan *Plan) error {
	var ks []keptPrefix
	for _, p := range ps.parts {
		if p.kept {
			ks = append(ks, keptPrefix{p.idx, p.rec.Blocks, p.tree})
		}
	}
	return plan.resume(ks)
}

// take hands the writer the kept partial of file i (nil: none).
func (ps *Partials) take(i int) *partial {
	if ps == nil {
		return nil
	}
	for _, p := range ps.parts {
		if p.idx == i && p.kept && p.f != nil {
			return p
		}
	}
	return nil
}

// Close releases the partial files not handed to a writer; those whose blocks did not match the
// sender's digests are removed, the others stay for a resume.
func (ps *Partials) Close(t *Target) {
	if ps == nil {
		return
	}
	if ps.hashed != nil {
		<-ps.hashed
	}
	for _, p := range ps.parts {
		if p.f == nil {
			continue // the writer has it
		}
		p.f.Close()
		p.f = nil
		if p.kept || !p.checked {
			continue // still resumable
		}
		if fd, err := unix.Open(t.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			d := &dirs{root: t.root, rootFD: fd, curFD: fd}
			if dfd, err := d.walk(p.dir, 0, false); err == nil {
				dropPartial(dfd, p.tmp)
				if dfd != fd {
					unix.Close(dfd)
				}
			}
			d.close()
		}
	}
}

// keptPrefix is a resumed file's kept blocks and its tree state after them.
type keptPrefix struct {
	file   int
	blocks uint32
	tree   *fileTree
}

// resume takes the kept prefixes out of the plan (both ends, before any data moves).
func (p *Plan) resume(ks []keptPrefix) error {
	for _, k := range ks {
		if k.file < 0 || k.file >= len(p.Files) || !p.Files[k.file].Regular() || p.skip[k.file] ||
			uint64(k.blocks) > blocksOf(p.Files[k.file].Size) || k.tree == nil || k.tree.count() != uint64(k.blocks) {
			return fmt.Errorf("internal: resume of file %d", k.file)
		}
	}
	for _, k := range ks {
		p.kept[k.file], p.prefix[k.file] = k.blocks, k.tree
	}
	return p.number()
}

// startTree is the tree state a file's digest starts from: after its kept blocks.
func (p *Plan) startTree(i int) fileTree {
	if t := p.prefix[i]; t != nil {
		return *t
	}
	return fileTree{}
}

// Prefixes are the sender's digests of the blocks a receiver offered to keep.
type Prefixes struct {
	offers []Offer
	sums   [][]byte // per offer, 32 bytes per block
	trees  []*fileTree
}

// CheckOffers checks a receiver's offers against plan (after Skip): regular files of the list
// that it does not skip, ascending, each once, 1 to MaxOfferBlocks blocks, no more than the
// file has. noResume: none at all.
func CheckOffers(plan *Plan, offers []Offer, noResume bool) error {
	if len(offers) > 0 && noResume {
		return fmt.Errorf("the receiver offered %d file(s) to resume, though resuming was turned off", len(offers))
	}
	return checkOfferList(plan, offers)
}

// checkOfferList checks offers (to resume or to compare) against plan: regular files of the list
// that it does not skip, ascending, each once, 1 to MaxOfferBlocks blocks, no more than the file
// has.
func checkOfferList(plan *Plan, offers []Offer) error {
	prev := -1
	for _, o := range offers {
		switch {
		case o.File < 0 || o.File >= len(plan.Files):
			return fmt.Errorf("file index %d is not in the list of %d entries", o.File, len(plan.Files))
		case o.File <= prev:
			return fmt.Errorf("file index %d named twice or out of order", o.File)
		case !plan.Files[o.File].Regular():
			return fmt.Errorf("file index %d (%s) is not a regular file", o.File, plan.Files[o.File].what())
		case plan.skip[o.File]:
			return fmt.Errorf("file index %d is already there", o.File)
		case o.Blocks == 0 || o.Blocks > MaxOfferBlocks || uint64(o.Blocks) > blocksOf(plan.Files[o.File].Size):
			return fmt.Errorf("%d blocks offered of file index %d (%d bytes)", o.Blocks, o.File, plan.Files[o.File].Size)
		}
		prev = o.File
	}
	return nil
}

// HashPrefixes reads and hashes the blocks offered (checked with CheckOffers) from the sources.
func HashPrefixes(ctx context.Context, plan *Plan, open Opener, offers []Offer) (*Prefixes, error) {
	ps := &Prefixes{offers: offers}
	for _, o := range offers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, c, err := open(o.File)
		if err != nil {
			return nil, err
		}
		sums, tree, err := hashPrefix(r, o.Blocks, plan.Files[o.File].Size)
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: read %s: %v", ErrSource, plan.Files[o.File].Name, err)
		}
		ps.sums, ps.trees = append(ps.sums, sums), append(ps.trees, tree)
	}
	return ps, nil
}

// Digests returns the digests of offer k's blocks, 32 bytes each, in order.
func (ps *Prefixes) Digests(k int) []byte { return ps.sums[k] }

// Offers is what was offered.
func (ps *Prefixes) Offers() []Offer { return ps.offers }

// Apply takes the receiver's verdict (kept: one entry per offer, in order, with all the blocks
// offered or none) into plan, with the tree state of this end's digests.
func (ps *Prefixes) Apply(plan *Plan, kept []Offer) error {
	if len(kept) != len(ps.offers) {
		return fmt.Errorf("the receiver answered %d of %d resume offers", len(kept), len(ps.offers))
	}
	var ks []keptPrefix
	for k, o := range ps.offers {
		if kept[k].File != o.File || (kept[k].Blocks != 0 && kept[k].Blocks != o.Blocks) {
			return fmt.Errorf("the receiver kept %d blocks of file %d, offered %d blocks of file %d", kept[k].Blocks, kept[k].File, o.Blocks, o.File)
		}
		if kept[k].Blocks > 0 {
			ks = append(ks, keptPrefix{o.File, o.Blocks, ps.trees[k]})
		}
	}
	return plan.resume(ks)
}
