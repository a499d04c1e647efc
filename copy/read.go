package copy

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/farwing/farwing/internal/escape"
)

// Block is one block of file data with its digest.
type Block struct {
	ID   uint32
	Data []byte // len = the block's length; backed by a pooled BlockSize buffer, or below SmallBlock its own (Pool.GetLen)
	// Hash is the block's digest: the chaining value of its subtree in its file's BLAKE3 tree
	// (see tree.go), which the receiver checks with Plan.Sum and BlockSum.Matches.
	Hash [32]byte

	sum BlockSum
}

// Pool is a bounded set of block buffers: taking blocks beyond its size waits, which is how both
// ends keep memory proportional to the window rather than to the file. A block shorter than
// SmallBlock (a small file's) gets a buffer of its own length instead, out of a byte budget of
// the pool's size in BlockSize buffers (Charge).
type Pool struct {
	tokens chan struct{} // one per buffer that may exist; taken by Get, returned by Put
	mu     sync.Mutex
	free   [][]byte // returned buffers, most recent last
	// smallLeft is what remains of the budget for short blocks' buffers; wake is closed (and
	// replaced) when some of it comes back while waiters (GetLen) wait on it.
	smallLeft int64
	waiters   int
	wake      chan struct{}
}

// NewPool makes a pool of at most n BlockSize buffers, allocated as they are first needed, and
// as many bytes again for short blocks' buffers.
// Get hands out the most recently returned buffer first, which is likely still in the CPU's
// cache, and allocates only when none is free: a transfer that keeps a few blocks in flight
// touches a few MiB, not n.
func NewPool(n int) *Pool {
	p := &Pool{tokens: make(chan struct{}, n), smallLeft: int64(n) * BlockSize, wake: make(chan struct{})}
	for range n {
		p.tokens <- struct{}{}
	}
	return p
}

// Get waits for a BlockSize buffer.
func (p *Pool) Get(ctx context.Context) ([]byte, error) {
	select {
	case <-p.tokens:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	var b []byte
	if k := len(p.free); k > 0 {
		b, p.free = p.free[k-1], p.free[:k-1]
	}
	p.mu.Unlock()
	if b == nil {
		b = NewBlockBuffer()
	}
	return b[:BlockSize], nil
}

// GetLen waits for a buffer for a block of n bytes: a pooled one (Get), or below SmallBlock one
// of its own, once the short blocks' budget has room for it.
func (p *Pool) GetLen(ctx context.Context, n int) ([]byte, error) {
	if n >= SmallBlock {
		b, err := p.Get(ctx)
		if err != nil {
			return nil, err
		}
		return b[:min(n, BlockSize)], nil
	}
	for {
		p.mu.Lock()
		if p.smallLeft >= int64(n) {
			p.smallLeft -= int64(n)
			p.mu.Unlock()
			return make([]byte, n, max(n, 1)), nil
		}
		wake := p.wake
		p.waiters++
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		p.mu.Lock()
		p.waiters--
		p.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// Put returns a buffer.
func (p *Pool) Put(b []byte) {
	p.mu.Lock()
	if cap(b) < BlockSize { // a short block's own (GetLen)
		p.smallLeft += int64(cap(b))
		if p.waiters > 0 {
			close(p.wake)
			p.wake = make(chan struct{})
		}
		p.mu.Unlock()
		return
	}
	p.free = append(p.free, b[:cap(b)])
	p.mu.Unlock()
	p.tokens <- struct{}{}
}

// Opener opens the i-th file of a plan for reading.
type Opener func(i int) (io.ReaderAt, io.Closer, error)

// readSize is how much Read reads with one call: a few pieces, hashed right after they were
// read, while the CPU's cache still holds them.
const readSize = 4 * PieceSize

// Read reads every block of plan in order (skipped files are not opened, a resumed file's kept
// blocks and a compared file's unchanged ones are not read), hashes it, and sends it to out.
// digest is called with each file's whole-file BLAKE3 digest as soon as its last block has been
// hashed (the kept blocks' sums in their places), before that block is sent on out; the calls
// are made in file order, all before Read returns. A file that changes size while it is read is
// an error.
//
// Each block is read readSize bytes at a time, and each piece hashed as soon as it is in memory
// (BlockHasher): hashing whole blocks afterwards, on a pool of workers, read them back from DRAM
// at half the speed and cost more than the read. One goroutine hashes ~9 GB/s this way with
// AVX-512 (~5 GB/s with AVX2); the whole-file digest is assembled from the block nodes (tree.go).
func Read(ctx context.Context, plan *Plan, open Opener, pool *Pool, out chan<- *Block, digest func(file int, sum [32]byte)) error {
	emit := func(b *Block) error {
		select {
		case out <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var h BlockHasher
	var tree fileTree
	for i, f := range plan.Files {
		if !f.Regular() || plan.Skipped(i) {
			continue // no bytes of its own, or the receiver has them
		}
		first, n := plan.FileBlocks(i)
		r, c, err := open(i)
		if err != nil {
			return err
		}
		tree = plan.startTree(i) // after the blocks the receiver kept (Resume)
		nextKept := 0            // the blocks the receiver keeps from its old file (Delta) go in between
		var last *Block
		for k := uint32(0); k < n; k++ {
			_, off, ln := plan.Locate(first + k)
			plan.addKept(&tree, i, &nextKept, uint32(off/BlockSize))
			buf, err := pool.GetLen(ctx, ln)
			if err != nil {
				c.Close()
				return err
			}
			h.Reset(plan, first+k, ln)
			for p := 0; p < ln; p += readSize {
				e := min(p+readSize, ln)
				m, err := r.ReadAt(buf[p:e], off+int64(p))
				if m < e-p {
					c.Close()
					if err == nil || err == io.EOF {
						return fmt.Errorf("%w: %s: file shrank while being read (at %d of %d bytes)", ErrSource, escape.Text(f.Name), off+int64(p+m), f.Size)
					}
					return fmt.Errorf("%w: read %s: %v", ErrSource, escape.Text(f.Name), err)
				}
				h.Range(buf[:ln], p, e)
			}
			b := &Block{ID: first + k, Data: buf[:ln], sum: h.Sum()}
			b.Hash = b.sum.Digest()
			tree.add(&b.sum)
			if k == n-1 {
				last = b // sent after the size check
				break
			}
			if err := emit(b); err != nil {
				c.Close()
				return err
			}
		}
		if fi, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
			if st, err := fi.Stat(); err == nil && st.Size() != f.Size {
				c.Close()
				return fmt.Errorf("%w: %s: file changed size while being read (%d → %d bytes)", ErrSource, escape.Text(f.Name), f.Size, st.Size())
			} else if err == nil && f.MTime != 0 && st.ModTime().UnixNano() != f.MTime {
				c.Close()
				return fmt.Errorf("%w: %s: file changed while being read (its modification time moved); copy again to send it as it is now", ErrSource, escape.Text(f.Name))
			}
		}
		c.Close()
		plan.addKept(&tree, i, &nextKept, uint32(blocksOf(f.Size)))
		digest(i, tree.sum())
		if last == nil {
			continue // empty, or every block kept
		}
		if err := emit(last); err != nil {
			return err
		}
	}
	return nil
}
