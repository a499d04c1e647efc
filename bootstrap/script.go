package bootstrap

import (
	_ "embed"
	"strings"
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

	startTemplate = template.Must(template.New("start.sh").Parse(startText))
	partTemplate  = template.Must(template.New("part.sh").Parse(partText))
)

// peerScriptData is what start.sh is given.
type peerScriptData struct {
	Hash, Priv, Read string        // the functions
	Builds           []scriptBuild // one case per build the remote's platform may ask for
	Announce, Chdir  string        // serve's flags: the cached peer says ok itself; the login directory
	Serve            string        // serve's arguments, quoted
	PrefaceLen       int           // bytes of preface before the answer, which the shell drops (0: none)
	AheadLen         int           // bytes of an upload's start after them (0: none), of the build Guess (HASH16)
	Guess            string
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
