package copy

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
)

// Block is one block of file data with its digest.
type Block struct {
	ID   uint32
	Data []byte // len = the block's length; backed by a pooled BlockSize buffer
	// Hash is the block's digest: the chaining value of its subtree in its file's BLAKE3 tree
	// (see tree.go), which the receiver checks with Plan.Sum and BlockSum.Matches.
	Hash [32]byte

	sum    BlockSum
	file   int        // index in the plan
	last   bool       // the file's last block
	empty  bool       // no data: marks a file without blocks, for its digest
	hashed sync.Mutex // held while a hash worker computes sum (Read's ordering)
}

// Pool is a bounded set of block buffers: taking blocks beyond its size waits, which is how both
// ends keep memory proportional to the window rather than to the file.
type Pool struct {
	tokens chan struct{} // one per buffer that may exist; taken by Get, returned by Put
	mu     sync.Mutex
	free   [][]byte // returned buffers, most recent last
}

// NewPool makes a pool of at most n BlockSize buffers, allocated as they are first needed.
// Get hands out the most recently returned buffer first, which is likely still in the CPU's
// cache, and allocates only when none is free: a transfer that keeps a few blocks in flight
// touches a few MiB, not n.
func NewPool(n int) *Pool {
	p := &Pool{tokens: make(chan struct{}, n)}
	for range n {
		p.tokens <- struct{}{}
	}
	return p
}

// Get waits for a buffer.
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
		b = make([]byte, BlockSize)
	}
	return b[:BlockSize], nil
}

// Put returns a buffer.
func (p *Pool) Put(b []byte) {
	p.mu.Lock()
	p.free = append(p.free, b[:cap(b)])
	p.mu.Unlock()
	p.tokens <- struct{}{}
}

// Opener opens the i-th file of a plan for reading.
type Opener func(i int) (io.ReaderAt, io.Closer, error)

// Read reads every block of plan in order, hashes it, and sends it to out. digest is called with
// each file's whole-file BLAKE3 digest as soon as its last block has been hashed, before that
// block is sent on out; the calls are made one at a time, in file order, and all before Read
// returns. A file that changes size while it is read is an error.
//
// The calling goroutine only reads. Each block is hashed once, by one of a worker per CPU; the
// whole-file digest is assembled from the block nodes (tree.go). Blocks reach out in order: each
// is queued both for a worker and, locked, on an ordered queue whose goroutine waits for the lock
// (the locked-container pattern of wireguard-go), so nothing is done per block beyond two
// channel sends.
func Read(ctx context.Context, plan *Plan, open Opener, pool *Pool, out chan<- *Block, digest func(file int, sum [32]byte)) error {
	workers := max(runtime.GOMAXPROCS(0), 1)
	ictx, stop := context.WithCancel(ctx) // stops the sending of queued blocks after an error
	defer stop()
	jobs := make(chan *Block, 2*workers)
	ordered := make(chan *Block, 2*workers+2)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range jobs {
				b.sum = plan.Sum(b.ID, b.Data)
				b.Hash = b.sum.Digest()
				b.hashed.Unlock()
			}
		})
	}
	emitted := make(chan error, 1)
	go func() {
		var err error
		var tree fileTree
		for b := range ordered {
			if b.empty {
				if err == nil {
					digest(b.file, (&fileTree{}).sum())
				}
				continue
			}
			b.hashed.Lock()
			if err != nil {
				continue
			}
			tree.add(&b.sum)
			if b.last {
				digest(b.file, tree.sum())
				tree.reset()
			}
			select {
			case out <- b:
			case <-ictx.Done():
				err = ictx.Err()
			}
		}
		emitted <- err
	}()
	err := readFiles(ctx, plan, open, pool, jobs, ordered)
	if err != nil {
		stop()
	}
	close(jobs)
	close(ordered)
	wg.Wait()
	if eerr := <-emitted; err == nil && eerr != nil {
		err = ctx.Err() // only the caller's context stops the sender without a read error
	}
	return err
}

func readFiles(ctx context.Context, plan *Plan, open Opener, pool *Pool, jobs, ordered chan<- *Block) error {
	queue := func(c chan<- *Block, b *Block) error {
		select {
		case c <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i, f := range plan.Files {
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
			b := &Block{ID: first + k, Data: buf[:ln], file: i}
			b.hashed.Lock() // unlocked by the hash worker
			if err := queue(jobs, b); err != nil {
				b.hashed.Unlock()
				c.Close()
				return err
			}
			if k == n-1 {
				b.last = true
				last = b // queued after the size check
				break
			}
			if err := queue(ordered, b); err != nil {
				c.Close()
				return err
			}
		}
		if fi, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
			if st, err := fi.Stat(); err == nil && st.Size() != f.Size {
				c.Close()
				return fmt.Errorf("%s: file changed size while being read (%d → %d bytes)", f.Name, f.Size, st.Size())
			}
		}
		c.Close()
		if last == nil {
			last = &Block{file: i, empty: true}
		}
		if err := queue(ordered, last); err != nil {
			return err
		}
	}
	return nil
}
