package bootstrap

import (
	_ "embed"
	"strings"
	"sync"
	"text/template"
)

// The remote scripts are shell files in script/ (POSIX sh and tools only; TestScriptsLint checks
// them with sh -n and, where it is installed, shellcheck): the shell functions as they are, the two
// scripts as text/templates of the values they need. What is sent is without its comment lines
// (stripComments): the scripts travel in ssh's command line (remoteCommand).

var (
	//go:embed script/hash.sh
	hashFunc string // h FILE: hv is its SHA-256
	//go:embed script/read.sh
	readFunc string // r N: exactly N bytes of the input to the output
	//go:embed script/private.sh
	privFunc string // v DIR: enter DIR where it is private, else c says why
	//go:embed script/start.sh
	startText string
	//go:embed script/part.sh
	partText string
)

// The templates are parsed on first use, and only ever named by the functions that write the
// scripts, not at the package's start: the peer build (cmd/farwing's tag farwing_peer), which
// imports this package for a few names but never writes a script, then carries no template
// parser (the linker drops what nothing it keeps can call).
var (
	parseOnce               sync.Once
	startParsed, partParsed *template.Template
)

func parseTemplates() {
	startParsed = template.Must(template.New("start.sh").Parse(startText))
	partParsed = template.Must(template.New("part.sh").Parse(partText))
}

// startTemplate is start.sh's template.
func startTemplate() *template.Template { parseOnce.Do(parseTemplates); return startParsed }

// partTemplate is part.sh's template.
func partTemplate() *template.Template { parseOnce.Do(parseTemplates); return partParsed }

// peerScriptData is what start.sh is given.
type peerScriptData struct {
	Hash, Priv, Read string        // the functions
	Builds           []scriptBuild // one case per build the remote's platform may ask for
	Announce, Chdir  string        // serve's flags: the cached peer says ok itself; the login directory
	Serve            string        // serve's arguments, quoted
	PrefaceLen       int           // bytes of preface before the answer, which the shell drops (0: none)
	AheadLen         int           // bytes of an upload's start after them (0: none), of the build Guess (HASH16)
	Guess            string
	AheadFormat      string // ... in this form (gzip or xz)
	Empty            string // the SHA-256 of nothing
	PruneDays        int
}

// scriptBuild is a build in start.sh's case: the `uname -s`/`uname -m` pairs it serves
// (PATTERN|PATTERN...), its name in the cache without "farwing-" and its SHA-256.
type scriptBuild struct{ Patterns, H16, Hash string }

// partScriptData is what part.sh is given.
type partScriptData struct {
	Priv, Read string
	Dir        string // the cache directory, quoted
	Q, Part    string // the upload's part-name prefix, and OFF-LEN
	N          int
}

// render executes t with data: the script as written, comments included.
func render(t *template.Template, data any) string {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		panic("bootstrap: " + t.Name() + ": " + err.Error()) // the templates are this package's own
	}
	return b.String()
}

// stripComments drops the lines that are only a comment, and blank ones: none of the scripts has a
// here-document or a quoted string that spans lines, where such a line would be text.
func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// pruneDays is the age (days since upload) past which installing a build removes other builds
// from the remote's cache.
const pruneDays = 30

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// emptySHA256 is the SHA-256 of no bytes: the remote script's check that it has a tool to hash with.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// peerScript is first contact in one ssh session (run by sh whatever the login shell:
// remoteCommand). It starts the cached peer of c for the remote's platform, found by
// `uname -s -m` (a platform c has none for is said as need with it: Start explains), when it is
// there and intact. (Not the one this user last found there without asking uname: a home
// directory shared by hosts of two CPUs holds the other's build too, and env, told to run a
// foreign executable, has sh read it as a script.) The peer is named in the cache by its own
// SHA-256 and checked against it before it runs, and must be this user's own file (not a link) in a cache directory that is private (privFunc); the
// peer prints the status line itself (AnnounceFlag). It makes a missing cache directory with mode
// 0700, and says unsafe (nothing run, nothing read) where the directory is not private. Once
// checked, the directory is the shell's working directory and everything in it is named relative
// to it (privFunc: a directory above it that others can write cannot swap it), the build too,
// started through env (bash's exec builtin would run ./NAME by the path cd took, wherever that
// leads by then), with ChdirFlag naming the directory the session started in. With
// --skip it is told to drop the aheadLen bytes of an upload's start that follow the preface,
// where the client wrote them (ahead.go): the start of guess's upload. Otherwise it reads and drops
// the preface (prefaceLen bytes the client sent before the answer), and, without the tool that
// unpacks the form they are in (xz or gzip: build.aheadFormat) or where the remote's build is not
// guess, those aheadLen bytes (else they are the upload's start, read as below), reports what is
// needed with the formats it can unpack (xz, gzip, raw: those it has tools for; the client picks
// with build.format), and reads the peer from its
// standard input in parts: a line "FARWING-UPLOAD FORMAT N ID" (N: the upload's size, ID: 16 hex
// digits the client chose at random), then any number of "FARWING-PART OFFSET LEN" lines, each
// followed by exactly LEN bytes, which it stores as DIR/.farwing-HASH16.ID.OFFSET-LEN.tmp (mode
// 0600) and acknowledges with "FARWING-GOT OFFSET LEN". Other ssh connections may store parts
// there too (partScript). "FARWING-JOIN OFFSET-LEN ..." names the parts that make the upload, in
// order: they must tile 0..N exactly (else badupload); those not there are named back in
// "FARWING-MISSING OFFSET-LEN ...", and the client sends them and joins again. A complete join is
// concatenated and unpacked into a temporary file (mode 0600; the peer itself runs with the
// session's umask) of the cache directory, and the parts removed. Only a file whose SHA-256 is
// this build's is made executable, renamed into place atomically and started, on the rest of the
// same stdin: the control channel. Nothing of its input is read after the join but by the peer
// (the shell's read stops at the join's newline; the parts are files by then), so the client may
// send the control channel's preface right after the join (it does where the main session carried
// every part; otherwise the remote may answer MISSING and read on, and the preface waits for ok).
// A short or corrupt part fails the hash check. Every number must be decimal without leading zeros, at most 10 digits, and every
// part inside N (else badupload: nothing run, this upload's parts removed). Installing a build is
// also when the cache is tidied: other builds installed more than pruneDays ago, and uploads
// abandoned for a day (parts included), are removed (a build still in use elsewhere is uploaded
// again by its next copy; a running peer is not affected).
//
// Only POSIX shell and tools: uname, head -c (readFunc), env, ls, xz and gzip where present, and a
// SHA-256 tool (openssl, sha256sum, shasum or sha256; none: the state nohash).
func peerScript(c catalog, guess int, serveArgs string, prefaceLen, aheadLen int) string {
	return stripComments(render(startTemplate(), peerScriptFor(c, guess, serveArgs, prefaceLen, aheadLen)))
}

// peerScriptFor is what start.sh is given for peerScript.
func peerScriptFor(c catalog, guess int, serveArgs string, prefaceLen, aheadLen int) peerScriptData {
	d := peerScriptData{Hash: hashFunc, Priv: privFunc, Read: readFunc, Empty: emptySHA256, PruneDays: pruneDays,
		Announce: AnnounceFlag, Chdir: ChdirFlag, Serve: serveArgs, PrefaceLen: prefaceLen, AheadLen: aheadLen,
		Guess: c.builds[guess].h16(), AheadFormat: c.builds[guess].aheadFormat()}
	for _, b := range c.builds {
		if pat := unamePatterns(b.platform); pat != "" {
			d.Builds = append(d.Builds, scriptBuild{Patterns: pat, H16: b.h16(), Hash: b.hash})
		}
	}
	return d
}
