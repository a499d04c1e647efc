// Package pipetest is the in-process stand-in for an ssh session's pipes in tests that run the
// remote peer in the same process (internal/xfer's own tests and xfertest).
package pipetest

import (
	"bytes"
	"io"
	"sync"
)

// Pipe is a pipe whose writes never block (an ssh session's pipes buffer too): what the client
// writes before the peer reads, its preface, waits in the buffer.
type Pipe struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    bytes.Buffer
	closed bool
}

// New returns an empty, open Pipe.
func New() *Pipe {
	p := &Pipe{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Write buffers b; after Close it fails with io.ErrClosedPipe.
func (p *Pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, io.ErrClosedPipe
	}
	p.buf.Write(b)
	p.cond.Broadcast()
	return len(b), nil
}

// Read waits for buffered bytes; after Close, once they are read, it returns io.EOF.
func (p *Pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && !p.closed {
		p.cond.Wait()
	}
	if p.buf.Len() == 0 {
		return 0, io.EOF
	}
	return p.buf.Read(b)
}

// Close ends the pipe for writers, and for readers once the buffer is read.
func (p *Pipe) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cond.Broadcast()
	return nil
}

// Len is how many bytes are buffered, not yet read.
func (p *Pipe) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.Len()
}
