package xfer

import (
	"bytes"
	"cmp"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	fcopy "github.com/farwing/farwing/copy"
	"github.com/farwing/farwing/internal/escape"
)

// The file list travels in chunks (docs/PROTOCOL.md, "File list"): the message that starts a
// transfer (push: hello; pull: files) announces the number of entries, and "list" messages then
// carry them in order, each a DEFLATE-compressed JSON array of at most maxChunkEntries entries and
// maxChunkRaw bytes. The receiver checks every chunk as it arrives (sizes, the count announced,
// the names by the one rule, no name twice across chunks) and decodes it entry by entry as it
// inflates, never holding a chunk's text, so a list of 100,000 entries costs it the entries
// themselves (some 150 bytes each, names aside), not a 64 MiB line and its decoding.
//
// The limits, coherent: a control line is at most maxMessage (64 MiB: a "have" of maxListEntries
// indexes fits); a chunk at most maxChunkWire on the wire (~2.7 MiB: maxChunkRaw of text that does
// not compress, in base64), maxChunkRaw of text and maxChunkEntries entries; a whole list at most
// maxListEntries entries and listBudget(entries) of text: maxListBytes in all, and no more than
// maxChunkRaw plus maxEntryText per entry announced. DEFLATE inflates up to a thousandfold, so
// without the last bound a list of a few entries and a few MB on the wire inflated to 1 GiB of
// text; with it a list's text is what its entries can take (a list of 100,000 entries of 200-byte
// names takes 487 bytes per entry: docs/PERFORMANCE.md).
const (
	// maxListEntries bounds a list's entries, at both ends: a sender with more refuses to start
	// (exit 3), a receiver refuses an announcement of more (exit 10).
	maxListEntries = 4_000_000
	// maxListBytes bounds the JSON text of a whole list, decompressed.
	maxListBytes = 1 << 30
	// maxEntryText is the text a list may take per entry announced, on average, beyond
	// maxChunkRaw (listBudget): what the longest entry an honest sender lists takes (a name of
	// 4096 bytes, a link target of 4095 and the other fields, some 8.4 KB), with room for JSON's
	// escapes, so that only a list padded beyond its entries meets it.
	maxEntryText = 16 << 10
	// maxChunkEntries and maxChunkRaw bound one chunk as the receiver takes it: entries, its JSON
	// text decompressed, and its message on the wire (the compressed text in base64, which can be
	// a third longer than the text when the text does not compress).
	maxChunkEntries = 4096
	maxChunkRaw     = 2 << 20
	maxChunkWire    = maxChunkRaw/3*4 + 4096
)

// listBudget is the most text a list of n entries may take: maxChunkRaw (a few entries of the
// longest names and link targets fit) and maxEntryText per entry, at most maxListBytes.
func listBudget(n int) int64 {
	return min(maxListBytes, maxChunkRaw+int64(max(n, 0))*maxEntryText)
}

// maxResultText is the most text one result of a verdict may take: a name of at most 4096 bytes
// and a path of at most maxResultPath (engine.go), every byte escaped at worst (\u00XX: 6 bytes),
// and the size, digest and keys. A verdict's text is at most maxChunkRaw and that per file sent
// (resultsBudget): without it, results of a few hundred files with paths of 2 MiB each inflated to
// 1 GiB of text, what a verdict of any length could take.
const maxResultText = 6*(4096+maxResultPath) + 256

// resultsBudget is the most text the results of n files sent may take (recvDone), at most
// maxListBytes.
func resultsBudget(n int) int64 {
	return min(maxListBytes, maxChunkRaw+int64(max(n, 0))*maxResultText)
}

// budgetText says what listBudget allows, for errors.
func budgetText(n int) string {
	return fmt.Sprintf("%d bytes, the most a list of %d entries may take (%d MiB and %d bytes per entry, %d MiB in all)",
		listBudget(n), n, maxChunkRaw>>20, maxEntryText, maxListBytes>>20)
}

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
// listBudget ends with an error in errc instead.
func encodeList(files []fcopy.File) (<-chan []byte, <-chan error) {
	return encodeChunks(files, listBudget(len(files)))
}

// encodeChunks encodes items into chunks in the background (cutChunks), for a list that is
// sent while other work goes on; their text may take at most limit bytes.
func encodeChunks[T any](items []T, limit int64) (<-chan []byte, <-chan error) {
	out := make(chan []byte, 16)
	errc := make(chan error, 1)
	go func() {
		defer close(out)
		c := chunker{limit: limit, entries: len(items)}
		errc <- cutChunks(&c, items, func(z []byte) error { out <- z; return nil })
	}()
	return out, errc
}

// chunker holds what cutting chunks needs (the text, the DEFLATE writer and its output) and the
// text cut so far, for one list or one verdict however many calls of cutChunks it takes.
type chunker struct {
	raw, z bytes.Buffer
	fw     *flate.Writer
	total  int64
	// limit bounds the text of all the chunks (0: maxListBytes), of a list of entries entries
	// (for the error).
	limit   int64
	entries int
}

// cutChunks encodes items into chunks of a JSON array each, DEFLATE-compressed, cut at
// chunkEntries items or chunkRaw bytes of text (list and results messages), and hands each to
// emit (a copy it may keep), in order. Text beyond c's limit, over all the calls on c, is an
// error, as is emit's.
func cutChunks[T any](c *chunker, items []T, emit func([]byte) error) error {
	if c.fw == nil {
		c.fw, _ = flate.NewWriter(&c.z, flate.BestSpeed)
	}
	c.raw.Reset()
	n := 0
	flush := func() error {
		c.raw.WriteByte(']')
		c.total += int64(c.raw.Len())
		c.z.Reset()
		c.fw.Reset(&c.z)
		c.fw.Write(c.raw.Bytes())
		c.fw.Close()
		c.raw.Reset()
		n = 0
		return emit(bytes.Clone(c.z.Bytes()))
	}
	for i := range items {
		b, err := json.Marshal(&items[i])
		if err != nil {
			return err
		}
		if n > 0 && (n >= chunkEntries || c.raw.Len()+len(b) >= chunkRaw) {
			if err := flush(); err != nil {
				return err
			}
		}
		if n == 0 {
			c.raw.WriteByte('[')
		} else {
			c.raw.WriteByte(',')
		}
		c.raw.Write(b)
		n++
		if c.limit > 0 && c.total+int64(c.raw.Len()) > c.limit {
			return fmt.Errorf("%w: %w: the names and attributes of the list take more than %s; copy the tree in parts", fcopy.ErrSource, ErrListLimit, budgetText(c.entries))
		}
		if c.total+int64(c.raw.Len()) > maxListBytes {
			return fmt.Errorf("%w: %w: more than %d MiB of names and attributes; copy the tree in parts", fcopy.ErrSource, ErrListLimit, maxListBytes>>20)
		}
	}
	if n > 0 {
		return flush()
	}
	return nil
}

// inflater decodes chunks: one DEFLATE reader for all of them, the text counted as it inflates.
type inflater struct {
	fr    io.ReadCloser
	z     bytes.Reader
	in    textCounter
	total int64 // text decompressed so far
	// limit bounds total (0: maxListBytes); over it, decode says tooMuch.
	limit   int64
	tooMuch string
}

// textCounter counts the text a chunk's decoder reads and stops it at the chunk's bound or the
// list's: the text is refused as it inflates, not once inflated. It hands the decoder the text
// with each run of space between tokens made one space (a JSON decoder keeps the space it skips
// until the next token: a chunk of spaces would be held whole), so the decoder holds one entry
// at a time.
type textCounter struct {
	d     *inflater
	n     int64 // this chunk's text
	over  error // why it was stopped
	inErr error // the DEFLATE reader's error, other than io.EOF
	// Where the text is: in a string, just after a backslash in one, just after space.
	inString, escaped, space bool
}

func (t *textCounter) Read(p []byte) (int, error) {
	for {
		if t.over != nil {
			return 0, t.over
		}
		n, err := t.d.fr.Read(p)
		t.n += int64(n)
		t.d.total += int64(n)
		switch limit := cmp.Or(t.d.limit, maxListBytes); {
		case t.n > maxChunkRaw:
			t.over = fmt.Errorf("more than %d KiB of text", maxChunkRaw>>10)
		case t.d.total > limit:
			t.over = errors.New(cmp.Or(t.d.tooMuch, fmt.Sprintf("the text exceeds %d MiB", limit>>20)))
		}
		if t.over != nil {
			return 0, t.over
		}
		if err != nil && err != io.EOF {
			t.inErr = err
		}
		k := 0
		for _, c := range p[:n] {
			space := false
			switch {
			case t.escaped:
				t.escaped = false
			case t.inString:
				t.escaped = c == '\\'
				t.inString = c != '"'
			case c == '"':
				t.inString = true
			case c == ' ' || c == '\t' || c == '\n' || c == '\r':
				if t.space {
					continue // one space stands for a run: it still parts two tokens
				}
				space = true
			}
			t.space = space
			p[k] = c
			k++
		}
		if k > 0 || err != nil {
			return k, err
		}
	}
}

// decode decompresses the chunk z (at most maxChunkRaw bytes of text, the inflater's limit in
// all) and decodes its JSON array into v (a *[]fcopy.File or *[]fcopy.FileResult, appended to)
// entry by entry, at most maxChunkEntries; it returns what is wrong with it.
func (d *inflater) decode(z []byte, v any) error {
	switch v := v.(type) {
	case *[]fcopy.File:
		return decodeChunk(d, z, v)
	case *[]fcopy.FileResult:
		return decodeChunk(d, z, v)
	}
	return fmt.Errorf("cannot decode a chunk into %T", v)
}

func decodeChunk[T any](d *inflater, z []byte, dst *[]T) error {
	if len(z) == 0 {
		return errors.New("empty")
	}
	d.z.Reset(z)
	if d.fr == nil {
		d.fr = flate.NewReader(&d.z)
	} else {
		d.fr.(flate.Resetter).Reset(&d.z, nil)
	}
	d.in = textCounter{d: d}
	dec := json.NewDecoder(&d.in)
	// Each error of the decoder's says first whether the text was stopped or was not DEFLATE.
	why := func(err error) error {
		switch {
		case d.in.over != nil:
			return d.in.over
		case d.in.inErr != nil:
			return fmt.Errorf("not DEFLATE data (%v)", d.in.inErr)
		}
		return fmt.Errorf("malformed (%v)", err)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		if err == nil {
			err = fmt.Errorf("%v where a JSON array starts", tok)
		}
		return why(err)
	}
	for n := 0; dec.More(); n++ {
		if n == maxChunkEntries {
			return fmt.Errorf("more than %d entries", maxChunkEntries)
		}
		*dst = append(*dst, *new(T))
		if err := dec.Decode(&(*dst)[len(*dst)-1]); err != nil {
			return why(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing bracket
		return why(err)
	}
	// Nothing but space after the array, and the end of a whole DEFLATE stream.
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			err = errors.New("more after the array")
		}
		return why(err)
	}
	return nil
}

// sendList sends the chunks encodeList makes, as "list" messages (ctl nil: drops them, so that
// the encoder ends).
func sendList(ctl *Control, chunks <-chan []byte, errc <-chan error) error {
	return sendAs(ctl, KindList, chunks, errc)
}

// sendAs sends chunks as messages of type t.
func sendAs(ctl *Control, t Kind, chunks <-chan []byte, errc <-chan error) error {
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
	d := inflater{limit: listBudget(n), tooMuch: "the list's text is over " + budgetText(n)}
	for chunk := 0; len(files) < n; chunk++ {
		m, err := ctl.Expect(ctx, KindList, listWait)
		if err != nil {
			return nil, err
		}
		had := len(files)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: refusing the file list: chunk %d (after %d of %d entries): %s", ErrProtocol, chunk, had, n, fmt.Sprintf(format, args...))
		}
		if err := d.decode(m.Z, &files); err != nil { // appended to files, bounded
			return nil, bad("%v", err)
		}
		part := files[had:]
		switch {
		case len(part) == 0:
			return nil, bad("no entries")
		case len(part) > n-had:
			return nil, bad("%d entries, more than the %d announced", len(part), n)
		}
		for i := range part {
			if s := part[i].Sum; s != "" && !IsDigest(s) {
				return nil, bad("%s: a blake3 that is not 64 hex digits", escape.Quote(part[i].Name))
			}
		}
		if err := check.Add(part); err != nil {
			return nil, fmt.Errorf("refusing the file list: %w", err)
		}
	}
	return files, nil
}

// confirmEvery is how often at most a receiver sends its confirmations of the files it placed
// since the last ones (unless a chunk's worth waits): a program driving a long copy hears of each
// file soon after it is in place, and a tree of 100,000 small files costs some 5 messages a
// second, not one per file.
const confirmEvery = 200 * time.Millisecond

// confirmer sends a receiver's confirmations of the files it has verified and placed, as it
// places them (docs/PROTOCOL.md, "File list"): the results wait in a queue and leave in "results"
// chunks, as the file list travels, every confirmEvery or as soon as a chunk's worth waits;
// done, once every file is placed, counts them all. The writer only queues (add), never waits on
// the control channel.
type confirmer struct {
	ctl   *Control
	mu    sync.Mutex
	queue []fcopy.FileResult
	kick  chan struct{} // a chunk's worth waits
	stop  chan struct{}
	ended chan struct{}
	// Owned by the sending goroutine until ended is closed:
	c    chunker
	sent int   // results sent
	err  error // the first error sending them; nothing more is sent after it
}

// newConfirmer starts sending confirmations on ctl.
func newConfirmer(ctl *Control) *confirmer {
	c := &confirmer{ctl: ctl, kick: make(chan struct{}, 1), stop: make(chan struct{}), ended: make(chan struct{})}
	go c.run()
	return c
}

// add queues the confirmation of a file verified and in place; safe for concurrent use.
func (c *confirmer) add(r fcopy.FileResult) {
	c.mu.Lock()
	c.queue = append(c.queue, r)
	full := len(c.queue) >= chunkEntries
	c.mu.Unlock()
	if full {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *confirmer) run() {
	defer close(c.ended)
	t := time.NewTicker(confirmEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.kick:
		case <-c.stop:
			c.send()
			return
		}
		c.send()
	}
}

// send sends what waits, in chunks.
func (c *confirmer) send() {
	c.mu.Lock()
	q := c.queue
	c.queue = nil
	c.mu.Unlock()
	if len(q) == 0 || c.err != nil {
		return
	}
	c.err = cutChunks(&c.c, q, func(z []byte) error { return c.ctl.Send(Msg{T: KindResults, Z: z}) })
	if c.err == nil {
		c.sent += len(q)
	}
}

// close sends what still waits and stops; it returns how many confirmations were sent, or why
// they could not all be. Call it once, after the last add.
func (c *confirmer) close() (int, error) {
	close(c.stop)
	<-c.ended
	return c.sent, c.err
}

// done ends the receiver's verdict: the confirmations that still wait, then done with their
// number (over the whole copy) and this end's stats.
func (c *confirmer) done(st *PeerStats) error {
	n, err := c.close()
	if err != nil {
		return err
	}
	return c.ctl.Send(Msg{T: KindDone, Entries: n, Stats: st})
}

// recvDone takes the receiver's confirmations and its verdict: results chunks, which come while
// the data travels, each checked as it arrives (at most maxChunkEntries and maxChunkRaw, all of
// them at most resultsBudget of text, never more results in all than the want files sent, no path
// longer than maxResultPath) and handed to take (nil: none), whose error ends it; then done with
// their number. The results are returned in the done message.
func recvDone(ctx context.Context, ctl *Control, want int, take func([]fcopy.FileResult) error) (Msg, error) {
	var results []fcopy.FileResult
	d := inflater{limit: resultsBudget(want), tooMuch: fmt.Sprintf("the verdict's text is over %d bytes, the most the results of %d files may take (%d MiB and %d bytes a file)",
		resultsBudget(want), want, maxChunkRaw>>20, maxResultText)}
	for chunk := 0; ; chunk++ {
		m, err := ctl.Next(ctx, 0)
		if err != nil {
			return m, err
		}
		had := len(results) // before this message: what its errors count
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: the receiver's confirmations: chunk %d (after %d results of the %d files sent): %s", ErrProtocol, chunk, had, want, fmt.Sprintf(format, args...))
		}
		switch m.T {
		case KindResults:
			if err := d.decode(m.Z, &results); err != nil { // appended to results, bounded
				return Msg{}, bad("%v", err)
			}
			part := results[had:]
			switch {
			case len(part) == 0:
				return Msg{}, bad("no results")
			case len(part) > want-had:
				return Msg{}, bad("%d results, more than the files sent", len(part))
			}
			for i := range part { // a path no receiver writes to is not kept
				if len(part[i].Path) > maxResultPath {
					return Msg{}, bad("%s: a path of %d bytes, more than %d", escape.Quote(part[i].Name), len(part[i].Path), maxResultPath)
				}
			}
			if take != nil {
				if err := take(part); err != nil {
					return Msg{}, err
				}
			}
		case KindDone:
			if m.Entries != len(results) {
				return Msg{}, bad("done announces %d results, %d came", m.Entries, len(results))
			}
			m.Results = results
			return m, nil
		default:
			return Msg{}, fmt.Errorf("%w: control channel: got %s, expected \"results\" or \"done\"", ErrProtocol, escape.Quote(string(m.T)))
		}
	}
}
