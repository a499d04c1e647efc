package copy

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/zeebo/blake3"
)

// Block is one block of file data with its BLAKE3 digest.
type Block struct {
	ID   uint32
	Data []byte // len = the block's length; backed by a pooled BlockSize buffer
	Hash [32]byte
}

// Pool is a bounded set of block buffers: taking blocks beyond its size waits, which is how both
// ends keep memory proportional to the window rather than to the file.
type Pool struct{ free chan []byte }

// NewPool makes a pool of n BlockSize buffers (allocated lazily).
func NewPool(n int) *Pool {
	p := &Pool{free: make(chan []byte, n)}
	for i := 0; i < n; i++ {
		p.free <- nil
	}
	return p
}

// Get waits for a buffer.
func (p *Pool) Get(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.free:
		if b == nil {
			b = make([]byte, BlockSize)
		}
		return b[:BlockSize], nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Put returns a buffer.
func (p *Pool) Put(b []byte) { p.free <- b[:cap(b)] }

// Opener opens the i-th file of a plan for reading.
type Opener func(i int) (io.ReaderAt, io.Closer, error)

// Read reads every block of plan in order, hashes it, and sends it to out. digest is called with
// each file's whole-file BLAKE3 digest as soon as its last byte has been read, before that file's
// last block is sent on out. A file that changes size while it is read is an error.
func Read(ctx context.Context, plan *Plan, open Opener, pool *Pool, out chan<- *Block, digest func(file int, sum [32]byte)) error {
	h := blake3.New()
	for i, f := range plan.Files {
		h.Reset()
		if f.Dir {
			continue
		}
		first, n := plan.FileBlocks(i)
		r, c, err := open(i)
		if err != nil {
			return err
		}
		var last *Block
		for k := uint32(0); k < n; k++ {
			buf, err := pool.Get(ctx)
			if err != nil {
				c.Close()
				return err
			}
			off := int64(k) * BlockSize
			ln := BlockSize
			if rest := f.Size - off; rest < BlockSize {
				ln = int(rest)
			}
			m, err := r.ReadAt(buf[:ln], off)
			if m < ln {
				c.Close()
				if err == nil || err == io.EOF {
					return fmt.Errorf("%s: file shrank while being read (at %d of %d bytes)", f.Name, off+int64(m), f.Size)
				}
				return fmt.Errorf("read %s: %w", f.Name, err)
			}
			b := &Block{ID: first + k, Data: buf[:ln], Hash: blake3.Sum256(buf[:ln])}
			h.Write(b.Data)
			if last != nil {
				select {
				case out <- last:
				case <-ctx.Done():
					c.Close()
					return ctx.Err()
				}
			}
			last = b
		}
		var sum [32]byte
		h.Sum(sum[:0])
		if fi, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
			if st, err := fi.Stat(); err == nil && st.Size() != f.Size {
				c.Close()
				return fmt.Errorf("%s: file changed size while being read (%d → %d bytes)", f.Name, f.Size, st.Size())
			}
		}
		c.Close()
		digest(i, sum)
		if last != nil {
			select {
			case out <- last:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}
