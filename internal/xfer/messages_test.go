package xfer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestMessages: every kind of message declared in messages.go is in the table, with who may send
// it and in which roles, and docs/PROTOCOL.md names it.
func TestMessages(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "messages.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Kind" {
				continue
			}
			for _, n := range v.Names {
				declared++
				if _, ok := messages[Kind(strings.Trim(v.Values[0].(*ast.BasicLit).Value, `"`))]; !ok {
					t.Errorf("%s is not in the table of messages", n.Name)
				}
			}
		}
	}
	if declared != len(messages) {
		t.Errorf("%d kinds declared, %d in the table", declared, len(messages))
	}
	doc, err := os.ReadFile("../../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	for k, m := range messages {
		if m.from == 0 || m.from&^byEither != 0 || m.roles == 0 || m.roles&^inAll != 0 {
			t.Errorf("%s: sent by %b in roles %b", k, m.from, m.roles)
		}
		if !strings.Contains(string(doc), "`"+string(k)+"`") {
			t.Errorf("docs/PROTOCOL.md does not name %s", k)
		}
	}
}
