// Package copy turns files into verified blocks and blocks back into files: the file list, the
// block plan shared by both ends, the reading side (block and whole-file BLAKE3) and the writing
// side (temporary file, digest check, fsync, rename). It knows nothing of how bytes cross the network.
package copy

import (
	"errors"
	"fmt"
	"io/fs"
)

// BlockSize is the unit of hashing, windowing and verification.
const BlockSize = 1 << 20

// MaxBlocks is the most blocks one copy can number: a block number is 32 bits wide, and 2^32-1
// is no block (the end of the numbering). MaxSize is the largest file, and the most bytes all
// the files of one copy can add up to, that it can number (just under 4 PiB): both ends refuse a
// size beyond it before any block is numbered (docs/PROTOCOL.md, Trust).
const (
	MaxBlocks = 1<<32 - 2
	MaxSize   = MaxBlocks * BlockSize
)

// ErrTooLarge marks a size beyond MaxSize.
var ErrTooLarge = errors.New("too large for one copy")

// checkSize refuses a file size a copy cannot number: negative, or beyond MaxSize.
func checkSize(name string, size int64) error {
	switch {
	case size < 0:
		return fmt.Errorf("%w: %q has a negative size (%d)", ErrName, name, size)
	case uint64(size) > MaxSize:
		return fmt.Errorf("%w: %q is %d bytes, more than the %d bytes (4 PiB) one copy can hold", ErrTooLarge, name, size, int64(MaxSize))
	}
	return nil
}

// File describes one entry of a transfer: a regular file, a directory, a symbolic link or (with
// -H) a hard link to an earlier file of the list. Only regular files have bytes (blocks).
type File struct {
	// Name is the slash-separated path relative to the transfer root: the source's base name for a
	// file argument, "dir/sub/file" for entries found under a directory argument with -r.
	Name  string      `json:"name"`
	Size  int64       `json:"size"`
	Mode  fs.FileMode `json:"mode"`          // permission bits
	MTime int64       `json:"mtime"`         // unix nanoseconds
	Dir   bool        `json:"dir,omitempty"` // a directory to create (its contents follow it in the list)
	// Link is a symbolic link's target text, created as it is and never followed (ValidLink).
	Link string `json:"link,omitempty"`
	// Hard names an earlier regular file of the list that this entry is a hard link to (-H).
	Hard string `json:"hard,omitempty"`
	// Sum is a regular file's whole-file BLAKE3 (hex), read before the copy: only with
	// --checksum (Checksum), for the receiver to compare with what it has.
	Sum string `json:"blake3,omitempty"`
	// Dev and Ino are a regular file's device and inode on the sending side: with its size and
	// mtime they are the source's identity a resume record (resume.go) is checked against.
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}

// Regular reports whether f is a regular file with contents of its own: not a directory, a
// symbolic link or a hard link. Only those have blocks, digests and results.
func (f File) Regular() bool { return !f.Dir && f.Link == "" && f.Hard == "" }

// what names f's kind in messages.
func (f File) what() string {
	switch {
	case f.Dir:
		return "a directory"
	case f.Link != "":
		return "a symbolic link"
	case f.Hard != "":
		return "a hard link"
	}
	return "a file"
}

// Plan maps a session's global block numbers onto files. Both ends build it from the same file
// list, so a block number alone names a file and an offset.
type Plan struct {
	Files     []File
	first     []uint32 // first global block of each file
	numBlocks uint32
	skip      []bool // files the receiver already has (Skip): no blocks, digest or result
	// kept is the number of blocks at the start of each file that the receiver kept from an
	// interrupted copy (Resume): they are not sent, and the global numbers cover the rest only.
	kept []uint32
	// prefix is the BLAKE3 tree state of each resumed file after its kept blocks (nil: none),
	// built by each end from its own digests of them.
	prefix []*fileTree
	// delta holds, for each file compared block by block with what the destination had (Delta;
	// nil: not compared), the blocks sent and those the receiver keeps from its old file.
	delta []*deltaFile
	// charge is the window charge (Charge) of the blocks of the files before each file.
	charge []int64
	// total is TotalBytes, counted whenever the blocks are numbered: the sender asks for it per
	// block, and a sum over the list each time made a copy of 100,000 small files quadratic
	// (1,000 files a second).
	total int64
}

// NewPlan checks the file list and numbers its blocks.
func NewPlan(files []File) (*Plan, error) {
	if err := checkTree(files); err != nil {
		return nil, err
	}
	p := &Plan{Files: files, first: make([]uint32, len(files)), skip: make([]bool, len(files)),
		kept: make([]uint32, len(files)), prefix: make([]*fileTree, len(files)), delta: make([]*deltaFile, len(files)), charge: make([]int64, len(files)+1)}
	return p, p.number() // checkTree bounded every size (checkSize)
}

// filePlan is the plan of one nameless file of size bytes, for hashing a file as a transfer
// does (HashFile, hashPrefix): size is bounded as a list's would be (checkSize).
func filePlan(size int64) (*Plan, error) {
	if err := checkSize("", size); err != nil {
		return nil, err
	}
	return &Plan{Files: []File{{Size: size}}, first: []uint32{0}, numBlocks: uint32(blocksOf(size)), kept: []uint32{0},
		skip: []bool{false}, delta: []*deltaFile{nil}, total: size}, nil
}

// number numbers the blocks of the files not skipped.
func (p *Plan) number() error {
	var n uint64
	var charge, t int64
	for i := range p.Files {
		p.first[i] = uint32(n)
		p.charge[i] = charge
		nb := p.blocks(i)
		n += uint64(nb)
		if n > MaxBlocks {
			return fmt.Errorf("%w: its files add up to more than %d blocks (%d bytes, 4 PiB)", ErrTooLarge, MaxBlocks, int64(MaxSize))
		}
		t += p.SentBytes(i)
		if nb > 0 {
			last := p.SentBytes(i) - int64(nb-1)*BlockSize
			charge += int64(nb-1)*BlockSize + Charge(int(last))
		}
	}
	p.charge[len(p.Files)] = charge
	p.numBlocks = uint32(n)
	p.total = t
	return nil
}

// SmallBlock is the length below which a block travels in a buffer of its own length rather
// than a pooled BlockSize one (a small file's only block).
const SmallBlock = BlockSize / 2

// Charge is what a block of n bytes counts against a receive window: its own length below
// SmallBlock, a whole BlockSize buffer otherwise. What a window's blocks are charged bounds the
// memory both ends hold for them.
func Charge(n int) int64 {
	if n < SmallBlock {
		return int64(n)
	}
	return BlockSize
}

// WindowSlots is how many blocks a window of w BlockSize blocks may hold at most: w ×
// WindowSlots, however short they are.
const WindowSlots = 32

// chargeBefore is the window charge of the blocks before global block b (b ≤ NumBlocks).
func (p *Plan) chargeBefore(b uint32) int64 {
	if b >= p.numBlocks {
		return p.charge[len(p.Files)]
	}
	file, _, _ := p.Locate(b)
	// Every block of a file but its last is a whole BlockSize, and its last is the last it sends.
	return p.charge[file] + int64(b-p.first[file])*BlockSize
}

// WindowEnd is the end (exclusive) of the receive window of window BlockSize blocks whose first
// block is base: the blocks from base on whose charges (Charge) add up to at most window ×
// BlockSize, no more than window × WindowSlots of them, and at least one. For files of whole
// blocks it is base+window. Both ends compute it from the same plan, the sender to stay inside
// it, the receiver to refuse what is not.
func (p *Plan) WindowEnd(base, window uint32) uint32 {
	slots := uint64(window) * WindowSlots
	if base >= p.numBlocks {
		return uint32(min(uint64(base)+slots, 1<<32-1))
	}
	budget := int64(window) * BlockSize
	start := p.chargeBefore(base)
	// The largest k in [1, hi] with chargeBefore(base+k)-start ≤ budget (charges only grow).
	lo, hi := uint64(1), min(slots, uint64(p.numBlocks-base))
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if p.chargeBefore(base+uint32(mid))-start <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return base + uint32(lo)
}

// blocksOf is the number of blocks of a file of size bytes, in uint64 arithmetic: right for any
// size, so that a size beyond MaxSize is seen as such (callers bound it before they narrow it).
func blocksOf(size int64) uint64 {
	if size <= 0 {
		return 0
	}
	return (uint64(size) + BlockSize - 1) / BlockSize
}

// blocks is the number of blocks file i sends: none once it is skipped, none of those kept.
func (p *Plan) blocks(i int) uint32 {
	switch {
	case p.skip[i]:
		return 0
	case p.delta[i] != nil:
		return uint32(len(p.delta[i].send))
	}
	return uint32(blocksOf(p.Files[i].Size)) - p.kept[i] // NewPlan bounded the size by MaxSize
}

// fileBlock is the index within file i of the k-th block it sends (k beyond them: past the
// file's end, as for any file).
func (p *Plan) fileBlock(i int, k uint32) uint32 {
	if d := p.delta[i]; d != nil {
		if n := uint32(len(d.send)); k >= n {
			return uint32(blocksOf(p.Files[i].Size)) + k - n
		}
		return d.send[k]
	}
	return p.kept[i] + k
}

// blockLen is the length of block b of a file of size bytes.
func blockLen(size int64, b uint32) int {
	return int(min(BlockSize, size-int64(b)*BlockSize))
}

// Skip takes the files at indexes have (the receiver's report of what it already has) out of the
// plan: they keep their place in the list but have no blocks, no digest and no result, and the
// blocks of the rest are numbered anew. have must name regular files of the plan, each once, in
// ascending order; anything else is refused and the plan is left as it was. Both ends call it
// with the same list before any data moves.
func (p *Plan) Skip(have []int) error {
	prev := -1
	for _, i := range have {
		switch {
		case i < 0 || i >= len(p.Files):
			return fmt.Errorf("file index %d is not in the list of %d entries", i, len(p.Files))
		case i <= prev:
			return fmt.Errorf("file index %d named twice or out of order", i)
		case !p.Files[i].Regular():
			return fmt.Errorf("file index %d (%s) is not a regular file", i, p.Files[i].what())
		case p.kept[i] > 0 || p.delta[i] != nil:
			return fmt.Errorf("file index %d is resumed or compared block by block", i)
		}
		prev = i
	}
	for _, i := range have {
		p.skip[i] = true
	}
	return p.number()
}

// Skipped reports whether file i was taken out of the plan (Skip).
func (p *Plan) Skipped(i int) bool { return p.skip[i] }

// SkippedFiles counts the files taken out of the plan and their bytes.
func (p *Plan) SkippedFiles() (n int, bytes int64) {
	for i, f := range p.Files {
		if p.skip[i] {
			n++
			bytes += f.Size
		}
	}
	return n, bytes
}

// NumBlocks is the number of blocks in the whole transfer.
func (p *Plan) NumBlocks() uint32 { return p.numBlocks }

// TotalBytes is the sum of the bytes the plan sends: the sizes of the files not skipped, less
// what the receiver kept of resumed ones.
func (p *Plan) TotalBytes() int64 { return p.total }

// SentBytes is what the plan sends of file i.
func (p *Plan) SentBytes(i int) int64 {
	if p.skip[i] {
		return 0
	}
	if n := p.blocks(i); n > 0 {
		// Every block but the file's last is whole, and that one is the last sent if it is sent.
		return int64(n-1)*BlockSize + int64(blockLen(p.Files[i].Size, p.fileBlock(i, n-1)))
	}
	return 0
}

// keptBytes is what the receiver kept of file i (Resume, Delta).
func (p *Plan) keptBytes(i int) int64 {
	if p.skip[i] {
		return 0
	}
	return p.Files[i].Size - p.SentBytes(i)
}

// Kept is the number of blocks at the start of file i that are not sent (Resume).
func (p *Plan) Kept(i int) uint32 { return p.kept[i] }

// ResumedFiles counts the files resumed and the bytes of the blocks they kept from the start.
func (p *Plan) ResumedFiles() (n int, bytes int64) {
	for i, f := range p.Files {
		if p.kept[i] > 0 {
			n++
			bytes += min(int64(p.kept[i])*BlockSize, f.Size)
		}
	}
	return n, bytes
}

// FileBlocks returns the first global block of file i and how many it has (none if skipped).
func (p *Plan) FileBlocks(i int) (first, n uint32) {
	return p.first[i], p.blocks(i)
}

// Locate returns the file, offset and length of global block b.
func (p *Plan) Locate(b uint32) (file int, off int64, n int) {
	// Binary search for the last file whose first block ≤ b.
	lo, hi := 0, len(p.first)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if p.first[mid] <= b {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	// A file with no blocks shares its first number with the next file, and the last file whose
	// first block is ≤ b is therefore always the one holding b.
	k := p.fileBlock(lo, b-p.first[lo])
	return lo, int64(k) * BlockSize, blockLen(p.Files[lo].Size, k)
}

// BlockLen is the length of global block b.
func (p *Plan) BlockLen(b uint32) int {
	_, _, n := p.Locate(b)
	return n
}
