package copy

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"

	"golang.org/x/sys/unix"
	"lukechampine.com/blake3/guts"

	"github.com/farwing/farwing/internal/escape"
)

// Changed blocks. A regular file of the list that the destination has with another size or time
// (one that what is already there, have.go, did not take) is compared block by block: the
// receiver hashes the blocks of its old file that the source's blocks cover whole (offerBlocks;
// the same digest the transfer gives each block: tree.go, computed for the source's size), and
// offers them (Offer: the first Blocks blocks); the sender hashes the same blocks of its source
// and answers which it sends (a bit per offered block); every block past the offer is sent. A
// file also resumed (resume.go) is compared past the blocks the resume kept. The receiver builds the new
// file in its temporary file, as any other: it copies each kept block from the old file (checking
// it against its own digest of it) and writes each received one, from the front, so that a resume
// record counts both; it never writes to the old file, and renames the new one over it only once
// the whole-file digest matches the sender's.
//
// What each end can do to the other: a sender's answer can only make the receiver keep blocks it
// offered, which are its own file's at the same place; a receiver's digests can only make the
// sender send fewer blocks of a file it asked for, and the receiver's own whole-file check then
// fails (ErrVerify) and nothing is placed. A sender that knows the receiver's digests can have
// every offered block kept and name the digest they make, so that the new file holds the old
// one's bytes without the sender ever knowing them: a file is offered only where that shows them
// to no one new (FindDeltas), and only with digests of the old file's own blocks (offerBlocks).

// Delta is one file's outcome of the comparison: of the Blocks blocks offered, the ones sent
// (Send: bit k, LSB first in byte k/8, set for block k), the rest kept; every block past Blocks
// is sent.
type Delta struct {
	File   int
	Blocks uint32
	Send   []byte
	// The sender's own sums of the kept blocks, in order: their chaining values (32 bytes a
	// block), or the only block's sum of a one-block file (the root: fileTree.addCV).
	cvs  [][8]uint32
	only *BlockSum
}

// deltaFile is a compared file's place in the plan: the blocks it sends and those kept, ascending,
// and (the sender's) the sums of the kept ones (Delta).
type deltaFile struct {
	send, keep []uint32
	cvs        [][8]uint32
	only       *BlockSum
}

// sendBit says whether block k of an offer is sent by the bitmap send.
func sendBit(send []byte, k uint32) bool { return send[k/8]&(1<<(k%8)) != 0 }

// checkBitmap checks that send is a bitmap of exactly blocks bits, its spare bits clear.
func checkBitmap(send []byte, blocks uint32) error {
	if uint64(len(send)) != (uint64(blocks)+7)/8 {
		return fmt.Errorf("%d bytes of blocks to send for an offer of %d blocks", len(send), blocks)
	}
	if r := blocks % 8; r != 0 && send[len(send)-1]>>r != 0 {
		return fmt.Errorf("blocks to send beyond the %d offered", blocks)
	}
	return nil
}

// ApplyDeltas takes the compared files' outcomes into the plan (both ends, after Skip and any
// resume, before any data moves): each file sends the blocks its Delta says, past those a resume
// kept, and the global numbers cover only those. Each must be a regular file of the plan neither
// skipped nor compared already, its offer within the file's blocks; anything else is refused and
// the plan left as it was.
func (p *Plan) ApplyDeltas(ds []*Delta) error {
	fs := make([]*deltaFile, len(ds))
	for k, d := range ds {
		i := d.File
		switch {
		case i < 0 || i >= len(p.Files) || !p.Files[i].Regular():
			return fmt.Errorf("file index %d is not a regular file of the list", i)
		case p.skip[i] || p.delta[i] != nil:
			return fmt.Errorf("file index %d is already there or compared", i)
		case d.Blocks == 0 || d.Blocks > MaxOfferBlocks || uint64(d.Blocks) > blocksOf(p.Files[i].Size):
			return fmt.Errorf("%d blocks compared of file index %d (%d bytes)", d.Blocks, i, p.Files[i].Size)
		}
		if err := checkBitmap(d.Send, d.Blocks); err != nil {
			return fmt.Errorf("file index %d: %v", i, err)
		}
		for _, e := range ds[:k] {
			if e.File == i {
				return fmt.Errorf("file index %d compared twice", i)
			}
		}
		f := &deltaFile{cvs: d.cvs, only: d.only}
		for b := p.kept[i]; b < uint32(blocksOf(p.Files[i].Size)); b++ {
			if b >= d.Blocks || sendBit(d.Send, b) {
				f.send = append(f.send, b)
			} else {
				f.keep = append(f.keep, b)
			}
		}
		if n := len(f.cvs); f.only != nil && len(f.keep) != 1 || f.only == nil && n > 0 && n != len(f.keep) {
			return fmt.Errorf("internal: %d sums of %d kept blocks of file index %d", n, len(f.keep), i)
		}
		fs[k] = f
	}
	for k, d := range ds {
		p.delta[d.File] = fs[k]
	}
	return p.number()
}

// DeltaStats counts what the comparison of changed files saved.
type DeltaStats struct {
	Files      int   // files compared block by block
	KeptBlocks int64 // their blocks the receiver kept from its old files
	SentBlocks int64 // their blocks sent
	KeptBytes  int64 // the bytes of the kept blocks
}

// DeltaStats counts the compared files and their kept and sent blocks.
func (p *Plan) DeltaStats() DeltaStats {
	var s DeltaStats
	for i, d := range p.delta {
		if d != nil {
			s.Files++
			s.KeptBlocks += int64(len(d.keep))
			s.SentBlocks += int64(len(d.send))
			for _, b := range d.keep {
				s.KeptBytes += int64(blockLen(p.Files[i].Size, b))
			}
		}
	}
	return s
}

// addKept adds to tree, in order, the sums of file i's kept blocks below block end (the file's
// block index), from *next on: the sender's own sums, taken when it compared.
func (p *Plan) addKept(tree *fileTree, i int, next *int, end uint32) {
	d := p.delta[i]
	if d == nil {
		return
	}
	for *next < len(d.keep) && d.keep[*next] < end {
		if d.only != nil {
			tree.add(d.only)
		} else {
			tree.addCV(d.cvs[*next])
		}
		*next++
	}
}

// CheckDeltas checks a receiver's offers to compare files against plan (after Skip): regular
// files of the list that it does not skip, ascending, each once, 1 to MaxOfferBlocks blocks, no
// more than the file has. whole (--whole-file) or sink (nothing is written): none at all.
func CheckDeltas(plan *Plan, offers []Offer, whole, sink bool) error {
	if len(offers) > 0 && (whole || sink) {
		return fmt.Errorf("the receiver offered %d file(s) to compare block by block, though it was asked to take whole files", len(offers))
	}
	return checkOfferList(plan, offers)
}

// CompareBlocks is the sender's side of the comparison of the offer o (checked with
// CheckDeltas, after any resume): it hashes the offered blocks of its source past those the
// resume kept and compares them with the receiver's digests (theirs: 32 bytes per offered block),
// and sends every block that differs. The bits of the blocks the resume kept are clear.
func CompareBlocks(ctx context.Context, plan *Plan, open Opener, o Offer, theirs []byte) (*Delta, error) {
	if len(theirs) != 32*int(o.Blocks) {
		return nil, fmt.Errorf("%d bytes of block digests for file %d, offered %d blocks", len(theirs), o.File, o.Blocks)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, c, err := open(o.File)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	d := &Delta{File: o.File, Blocks: o.Blocks, Send: make([]byte, (o.Blocks+7)/8)}
	f := plan.Files[o.File]
	err = eachBlock(r, f.Size, min(plan.kept[o.File], o.Blocks), o.Blocks, func(b uint32, s *BlockSum) {
		cv := guts.ChainingValue(s.node)
		switch {
		case cvBytes(cv) != [32]byte(theirs[32*b:]):
			d.Send[b/8] |= 1 << (b % 8)
		case blocksOf(f.Size) == 1:
			only := *s
			d.only = &only
		default:
			d.cvs = append(d.cvs, cv)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %v", ErrSource, escape.Text(f.Name), err)
	}
	return d, nil
}

// oldFile is a destination file the receiver offered to compare with its source.
type oldFile struct {
	idx       int
	dir, base string // its directory, relative to the target's root, and its name there
	dev, ino  uint64
	size      int64
	mtime     unix.Timespec
	blocks    uint32        // offered: the source's blocks it holds whole, from the start
	sums      []byte        // this end's digests of them, 32 bytes each (Deltas.Hash)
	hashed    chan struct{} // closed once sums are set
	bad       bool          // it could not be read as offered: nothing of it is kept
}

// same says whether st is the file offered.
func (o *oldFile) same(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && uint64(st.Dev) == o.dev && uint64(st.Ino) == o.ino &&
		st.Size == o.size && st.Mtim == o.mtime
}

// Deltas are the destination files a receiver offered to compare block by block.
type Deltas struct {
	root string
	olds []*oldFile // ascending idx
	plan *Plan
}

// FindDeltas looks, below the target, at the regular files of files that are not in have and
// have bytes: where the destination has, at the name, a regular file of one link (never through
// a link: a file with other names is sent whole, its blocks could be another name's) that holds
// at least one of the source's blocks whole (offerBlocks), and whose replacement would show its
// bytes to no one it does not (exposes; preserve: -p; nor under the other names of the list's
// hard links to it, -H, in directories that may not guard them as its own does), that file is
// offered for comparison (a file also offered for a resume too: it is compared past what the
// resume keeps). Nothing is read yet (Hash). whole (--whole-file): none.
func (t *Target) FindDeltas(files []File, have []int, whole, preserve bool) *Deltas {
	ds := &Deltas{root: t.root}
	if whole {
		return ds
	}
	not := map[int]bool{}
	for _, i := range have {
		not[i] = true
	}
	linked := map[string]bool{} // the files other entries link to (-H)
	for _, f := range files {
		if f.Hard != "" {
			linked[f.Hard] = true
		}
	}
	t.eachDir(files, func(i int, fd int, dir, base string) {
		f := files[i]
		if not[i] || f.Size == 0 || linked[f.Name] {
			return
		}
		var st unix.Stat_t
		if unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 ||
			exposes(fd, &st, f, preserve) {
			return
		}
		if n := offerBlocks(st.Size, f.Size); n > 0 {
			ds.olds = append(ds.olds, &oldFile{idx: i, dir: dir, base: base, dev: uint64(st.Dev), ino: uint64(st.Ino),
				size: st.Size, mtime: st.Mtim, blocks: n, hashed: make(chan struct{})})
		}
	})
	return ds
}

// exposes says whether the new file f, replacing the old file st in directory dirfd, would let
// anyone read (or write, or run) what the old one does not: another owner, permission bits the
// old file lacks, or its group's bits for another group. Its kept blocks are the old file's
// bytes, and a hostile sender can have them all kept without knowing them (it answers that no
// block differs, and names as the file's digest the one the receiver's block digests give it):
// with -p's mode 0644 on a private file of 0600, the old bytes would stand readable by all. Such
// a file is sent whole.
func exposes(dirfd int, st *unix.Stat_t, f File, preserve bool) bool {
	mode := uint32(newMode(f, st, preserve))
	if int(st.Uid) != os.Geteuid() || mode&^(uint32(st.Mode)&0o777) != 0 {
		return true
	}
	return mode&0o070 != 0 && newGid(dirfd) != st.Gid
}

// newGid is the group of a file created in directory dirfd: the directory's where it is
// set-group-ID (and always on the BSDs and macOS), else this process's.
func newGid(dirfd int) uint32 {
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) == nil && (st.Mode&unix.S_ISGID != 0 || runtime.GOOS != "linux") {
		return st.Gid
	}
	return uint32(os.Getegid())
}

// offerBlocks is how many blocks of a source of size bytes an old file of old bytes is offered
// for: its whole blocks (BlockSize each) that the source's whole blocks cover, and its last,
// shorter block too only where the old file has the source's size. The source's size, the
// sender's word, decides how long its last block is; a receiver that hashed its old file's bytes
// at that length would give a hostile sender the digest of a prefix of its choosing (a file listed
// with 1 byte: the digest of the old file's first byte, 256 guesses; a byte more each run), so a
// digest sent is only ever that of one of the old file's own blocks. A source cut short in a
// block sends that block.
func offerBlocks(old, size int64) uint32 {
	n := blocksOf(size)
	if old != size {
		n = uint64(min(old, size)) / BlockSize
	}
	return uint32(min(n, MaxOfferBlocks))
}

// eachDir calls fn for each regular file of files with its directory open (fd, never through a
// link; dir relative to the root) and its name there; files whose directory cannot be opened so
// are left out.
func (t *Target) eachDir(files []File, fn func(i, fd int, dir, base string)) {
	rootFD, err := unix.Open(t.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	d := &dirs{root: t.root, rootFD: rootFD, curFD: rootFD}
	defer d.close()
	cur, fd, walkErr := "", -1, error(nil)
	defer func() {
		if fd >= 0 && fd != rootFD {
			unix.Close(fd)
		}
	}()
	for i, f := range files {
		if !f.Regular() {
			continue
		}
		dir, base, _ := cutLast(t.rel(f.Name))
		if fd < 0 && walkErr == nil || dir != cur {
			if fd >= 0 && fd != rootFD {
				unix.Close(fd)
			}
			cur = dir
			fd, walkErr = d.walk(dir, 0, false)
		}
		if walkErr == nil {
			fn(i, fd, dir, base)
		}
	}
}

// Offers lists the files offered for comparison, ascending, each with the blocks offered.
func (ds *Deltas) Offers() []Offer {
	if ds == nil {
		return nil
	}
	var o []Offer
	for _, f := range ds.olds {
		o = append(o, Offer{File: f.idx, Blocks: f.blocks})
	}
	return o
}

// Hash computes this end's digests of the offered blocks, in the background, file after file
// (Digests waits for each): for the source's sizes (plan's), so that a block that is the
// source's has the digest the sender computes.
func (ds *Deltas) Hash(ctx context.Context, plan *Plan) {
	ds.plan = plan
	go func() {
		for _, o := range ds.olds {
			if ctx.Err() == nil {
				ds.hash(o)
			}
			close(o.hashed)
		}
	}()
}

// hash hashes o's offered blocks; where the file cannot be read as it was offered, its digests
// are zeros, which no block has: all of it is sent.
func (ds *Deltas) hash(o *oldFile) {
	size := ds.plan.Files[o.idx].Size
	f, err := ds.openOld(o)
	if err == nil {
		defer f.Close()
		sums := make([]byte, 0, 32*int(o.blocks))
		if eachBlock(f, size, 0, o.blocks, func(_ uint32, s *BlockSum) { d := s.Digest(); sums = append(sums, d[:]...) }) == nil {
			o.sums = sums
			return
		}
	}
	o.bad, o.sums = true, make([]byte, 32*int(o.blocks))
}

// openOld opens the old file o by its name below the root, never through a link, and only if it
// is still the file offered.
func (ds *Deltas) openOld(o *oldFile) (*os.File, error) {
	d := newDirs(ds.root)
	defer d.close()
	if err := d.openRoot(); err != nil {
		return nil, err
	}
	fd, err := d.walk(o.dir, 0, false)
	if err != nil {
		return nil, err
	}
	if fd != d.rootFD {
		defer unix.Close(fd)
	}
	return openOldAt(fd, o)
}

// openOldAt opens the old file o in its directory fd, never through a link, and only if it is
// still the file offered.
func openOldAt(fd int, o *oldFile) (*os.File, error) {
	ofd, err := unix.Openat(fd, o.base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(ofd, &st); err != nil || !o.same(&st) {
		unix.Close(ofd)
		return nil, fmt.Errorf("it is no longer the file that was compared")
	}
	return os.NewFile(uintptr(ofd), o.base), nil
}

// Digests waits for this end's digests of offer k's blocks (Hash), 32 bytes each.
func (ds *Deltas) Digests(ctx context.Context, k int) ([]byte, error) {
	select {
	case <-ds.olds[k].hashed:
		if ds.olds[k].sums == nil {
			return nil, context.Cause(ctx)
		}
		return ds.olds[k].sums, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Answer takes the sender's answer to offer k (the next one, after any resume): which of its
// blocks it sends. An answer for another file, whose bitmap is not of the offer's length, or that
// keeps a block of a file this end could not read to compare (its digests were zeros, which no
// block has), is an error (the sender's).
func (ds *Deltas) Answer(k int, file int, send []byte) (*Delta, error) {
	o := ds.olds[k]
	if file != o.idx {
		return nil, fmt.Errorf("blocks to send of file %d, expected those of file %d", file, o.idx)
	}
	if err := checkBitmap(send, o.blocks); err != nil {
		return nil, fmt.Errorf("file %d: %v", file, err)
	}
	<-o.hashed // a hostile sender may answer before this end's digests went
	for b := ds.plan.kept[o.idx]; o.bad && b < o.blocks; b++ {
		if !sendBit(send, b) {
			return nil, fmt.Errorf("file %d: block %d kept, though this end could not read it to compare it (its digest was zeros)", file, b)
		}
	}
	return &Delta{File: file, Blocks: o.blocks, Send: send}, nil
}

// take hands the writer the old file of file i, if it was compared (nil otherwise).
func (ds *Deltas) take(i int) *oldFile {
	if ds == nil {
		return nil
	}
	k := sort.Search(len(ds.olds), func(k int) bool { return ds.olds[k].idx >= i })
	if k < len(ds.olds) && ds.olds[k].idx == i {
		return ds.olds[k]
	}
	return nil
}
