package xfer

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
)

// The file list travels in chunks (docs/PROTOCOL.md, "File list"): the message that starts a
// transfer (push: hello; pull: files) announces the number of entries, and "list" messages then
// carry them in order, each a DEFLATE-compressed JSON array of at most maxChunkEntries entries and
// maxChunkRaw bytes. The receiver checks every chunk as it arrives (sizes, the count announced,
// the names by the one rule, no name twice across chunks) and never holds more than one chunk's
// text at a time, so a list of 100,000 entries costs it the entries themselves (some 150 bytes
// each, names aside), not a 64 MiB line and its decoding.
const (
	// maxListEntries bounds a list's entries, at both ends: a sender with more refuses to start
	// (exit 3), a receiver refuses an announcement of more (exit 10).
	maxListEntries = 4_000_000
	// maxListBytes bounds the JSON text of a whole list, decompressed.
	maxListBytes = 1 << 30
	// maxChunkEntries and maxChunkRaw bound one chunk as the receiver takes it: entries, its JSON
	// text decompressed, and its message on the wire (the compressed text in base64, which can be
	// a third longer than the text when the text does not compress).
	maxChunkEntries = 4096
	maxChunkRaw     = 2 << 20
	maxChunkWire    = maxChunkRaw/3*4 + 4096
)

// chunkEntries and chunkRaw are where a sender cuts its chunks (chunkEntries is a variable: this
// package's tests cut smaller ones, to have many chunks of a small tree). One entry is at most
// some 50 KiB of JSON (4,096 bytes of name and 4,095 of link target, each byte escaped as \u00XX
// at worst), so a chunk cut after chunkRaw stays below maxChunkRaw.
var chunkEntries = 2048

const chunkRaw = 1 << 20

// listWait bounds the wait for each chunk: a peer that stops half way is silent (PeerIdle; a
// variable: TestListSilent waits less).
var listWait = PeerIdle

// ErrListLimit marks a file list beyond what a transfer carries (maxListEntries, maxListBytes).
var ErrListLimit = errors.New("file list too large")

// checkListSize is the sender's own check of its list against the limits the receiver applies,
// before anything is sent.
func checkListSize(files []fcopy.File) error {
	if len(files) > maxListEntries {
		return fmt.Errorf("%w: %w: %d entries, more than the %d one copy carries; copy the tree in parts", fcopy.ErrSource, ErrListLimit, len(files), maxListEntries)
	}
	return nil
}

// encodeList encodes files into chunks, in order, in the background: each is a "list"
// message's payload. The channel is closed after the last one; a list whose text exceeds
// maxListBytes ends with an error in errc instead.
func encodeList(files []fcopy.File) (<-chan []byte, <-chan error) { return encodeChunks(files) }

// encodeChunks encodes items into chunks of a JSON array each, DEFLATE-compressed, cut at
// chunkEntries items or chunkRaw bytes of text (list and results messages).
func encodeChunks[T any](items []T) (<-chan []byte, <-chan error) {
	out := make(chan []byte, 16)
	errc := make(chan error, 1)
	go func() {
		defer close(out)
		var raw, z bytes.Buffer
		fw, _ := flate.NewWriter(&z, flate.BestSpeed)
		var total int64
		n := 0
		flush := func() {
			raw.WriteByte(']')
			total += int64(raw.Len())
			z.Reset()
			fw.Reset(&z)
			fw.Write(raw.Bytes())
			fw.Close()
			out <- bytes.Clone(z.Bytes())
			raw.Reset()
			n = 0
		}
		for i := range items {
			b, err := json.Marshal(&items[i])
			if err != nil {
				errc <- err
				return
			}
			if n > 0 && (n >= chunkEntries || raw.Len()+len(b) >= chunkRaw) {
				flush()
			}
			if n == 0 {
				raw.WriteByte('[')
			} else {
				raw.WriteByte(',')
			}
			raw.Write(b)
			n++
			if total+int64(raw.Len()) > maxListBytes {
				errc <- fmt.Errorf("%w: %w: more than %d MiB of names and attributes; copy the tree in parts", fcopy.ErrSource, ErrListLimit, maxListBytes>>20)
				return
			}
		}
		if n > 0 {
			flush()
		}
		errc <- nil
	}()
	return out, errc
}

// inflater decodes chunks: one DEFLATE reader and one buffer for all of them.
type inflater struct {
	fr    io.ReadCloser
	raw   bytes.Buffer
	total int64 // text decompressed so far
}

// decode decompresses the chunk z (at most maxChunkRaw bytes of text, maxListBytes in all) and
// unmarshals its JSON array into v; it returns what is wrong with it.
func (d *inflater) decode(z []byte, v any) error {
	if len(z) == 0 {
		return errors.New("empty")
	}
	if d.fr == nil {
		d.fr = flate.NewReader(bytes.NewReader(z))
	} else {
		d.fr.(flate.Resetter).Reset(bytes.NewReader(z), nil)
	}
	d.raw.Reset()
	if _, err := d.raw.ReadFrom(io.LimitReader(d.fr, maxChunkRaw+1)); err != nil {
		return fmt.Errorf("not DEFLATE data (%v)", err)
	}
	if d.raw.Len() > maxChunkRaw {
		return fmt.Errorf("more than %d KiB of text", maxChunkRaw>>10)
	}
	if d.total += int64(d.raw.Len()); d.total > maxListBytes {
		return fmt.Errorf("the text exceeds %d MiB", maxListBytes>>20)
	}
	if err := json.Unmarshal(d.raw.Bytes(), v); err != nil {
		return fmt.Errorf("malformed (%v)", err)
	}
	return nil
}

// sendList sends the chunks encodeList makes, as "list" messages (ctl nil: drops them, so that
// the encoder ends).
func sendList(ctl *Control, chunks <-chan []byte, errc <-chan error) error {
	return sendAs(ctl, "list", chunks, errc)
}

// sendAs sends chunks as messages of type t.
func sendAs(ctl *Control, t string, chunks <-chan []byte, errc <-chan error) error {
	for z := range chunks {
		if ctl == nil {
			continue
		}
		if err := ctl.Send(Msg{T: t, Z: z}); err != nil {
			for range chunks { // let the encoder end
			}
			return err
		}
	}
	return <-errc
}

// SendFiles sends a file list: head (the hello or files message, without the entries) with the
// number of entries announced, then the entries in chunks.
func sendFiles(ctl *Control, head Msg, files []fcopy.File) error {
	head.Entries = len(files)
	if err := ctl.Send(head); err != nil {
		return err
	}
	chunks, errc := encodeList(files)
	return sendList(ctl, chunks, errc)
}

// recvList receives the n entries a peer announced, in "list" messages, each chunk checked as it
// arrives (see the constants above, and fcopy.TreeCheck); any other message, a silence of
// PeerIdle, or a chunk that breaks a rule ends it. The list is returned only whole; it still has
// to pass NewPlan (and on a pull MatchRequest).
func recvList(ctx context.Context, ctl *Control, n int) ([]fcopy.File, error) {
	if n < 0 || n > maxListEntries {
		return nil, fmt.Errorf("%w: refusing the file list: %d entries announced (at most %d)", ErrProtocol, n, maxListEntries)
	}
	files := make([]fcopy.File, 0, min(n, 1<<16))
	check := fcopy.NewTreeCheck(n)
	var d inflater
	for chunk := 0; len(files) < n; chunk++ {
		m, err := ctl.Expect(ctx, "list", listWait)
		if err != nil {
			return nil, err
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: refusing the file list: chunk %d (after %d of %d entries): %s", ErrProtocol, chunk, len(files), n, fmt.Sprintf(format, args...))
		}
		var part []fcopy.File
		if err := d.decode(m.Z, &part); err != nil {
			return nil, bad("%v", err)
		}
		switch {
		case len(part) == 0:
			return nil, bad("no entries")
		case len(part) > maxChunkEntries:
			return nil, bad("%d entries, more than %d", len(part), maxChunkEntries)
		case len(part) > n-len(files):
			return nil, bad("%d entries, more than the %d announced", len(part), n)
		}
		if err := check.Add(part); err != nil {
			return nil, fmt.Errorf("refusing the file list: %w", err)
		}
		files = append(files, part...)
	}
	return files, nil
}

// sendDone sends the receiver's verdict: its results in "results" chunks (as the file list
// travels: a verdict on 100,000 files of long names is some 100 MB of JSON), then done with their
// number and this end's stats.
func sendDone(ctl *Control, results []fcopy.FileResult, st *PeerStats) error {
	chunks, errc := encodeChunks(results)
	if err := sendAs(ctl, "results", chunks, errc); err != nil {
		return err
	}
	return ctl.Send(Msg{T: "done", Entries: len(results), Stats: st})
}

// recvDone takes the receiver's verdict: results chunks, each checked as it arrives (at most
// maxChunkEntries and maxChunkRaw, never more results in all than the want files sent), then
// done with their number. What the results say is checked afterwards (checkResults).
func recvDone(ctx context.Context, ctl *Control, want int) (Msg, error) {
	var results []fcopy.FileResult
	var d inflater
	for chunk := 0; ; chunk++ {
		m, err := ctl.Next(ctx, 0)
		if err != nil {
			return m, err
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: the receiver's verdict: chunk %d (after %d results of the %d files sent): %s", ErrProtocol, chunk, len(results), want, fmt.Sprintf(format, args...))
		}
		switch m.T {
		case "results":
			var part []fcopy.FileResult
			if err := d.decode(m.Z, &part); err != nil {
				return Msg{}, bad("%v", err)
			}
			switch {
			case len(part) == 0:
				return Msg{}, bad("no results")
			case len(part) > maxChunkEntries:
				return Msg{}, bad("%d results, more than %d", len(part), maxChunkEntries)
			case len(part) > want-len(results):
				return Msg{}, bad("%d results, more than the files sent", len(part))
			}
			results = append(results, part...)
		case "done":
			if m.Entries != len(results) {
				return Msg{}, bad("done announces %d results, %d came", m.Entries, len(results))
			}
			m.Results = results
			return m, nil
		default:
			return Msg{}, fmt.Errorf("%w: control channel: got %s, expected \"results\" or \"done\"", ErrProtocol, escape.Quote(m.T))
		}
	}
}
