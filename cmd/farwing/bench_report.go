package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/farwing/farwing/bench"
	"github.com/farwing/farwing/internal/escape"
)

// tables are the settings the bench's tables state beyond its ledger: the lab's.
func (b *benchOptions) tables() bench.TableSettings {
	return bench.TableSettings{Lab: b.lab, LabRateBps: b.labRateBps, LabRTT: b.labRTT, FairDuration: b.fairDuration,
		HalveSize: b.halveBytes, HalveAt: b.halveAt}
}

// benchReport is farwing bench --report LEDGER...: each ledger's header and tables (bench.Report),
// the tables' settings read back from its command line with the bench's own flags. Every ledger
// is read and checked before anything is printed; a flag of the measuring bench, a file that
// is not a ledger of this schema, or a command line these flags do not take is a usage error.
func benchReport(fs *pflag.FlagSet, fail func(int, error) int) int {
	var other []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Name != "report" {
			other = append(other, "--"+f.Name)
		}
	})
	if len(other) > 0 {
		return fail(exitUsage, fmt.Errorf("--report prints ledgers and measures nothing: %s does not go with it", strings.Join(other, ", ")))
	}
	if fs.NArg() == 0 {
		return fail(exitUsage, fmt.Errorf("--report needs one or more ledgers, as --json writes them"))
	}
	var out strings.Builder
	for i, name := range fs.Args() {
		l, err := bench.ReadLedger(name)
		if err != nil {
			return fail(exitUsage, err)
		}
		s, err := ledgerTables(l)
		if err != nil {
			return fail(exitUsage, fmt.Errorf("ledger %s: %v", escape.Text(name), err))
		}
		if i > 0 {
			out.WriteString("\n")
		}
		bench.Report(&out, l, s)
	}
	fmt.Fprint(stdout, out.String())
	return 0
}

// ledgerTables reads the tables' settings back from a ledger's command line, parsed and checked
// as the bench parsed it.
func ledgerTables(l *bench.Ledger) (bench.TableSettings, error) {
	if len(l.Argv) < 2 || l.Argv[0] != "farwing" || l.Argv[1] != "bench" {
		return bench.TableSettings{}, fmt.Errorf("its command line is not a farwing bench's: %s", escape.Quote(strings.Join(l.Argv, " ")))
	}
	fs := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var b benchOptions
	b.register(fs)
	err := fs.Parse(l.Argv[2:])
	if err == nil && b.report {
		err = errors.New("--report")
	}
	if err == nil {
		err = b.parse()
	}
	if err != nil {
		return bench.TableSettings{}, fmt.Errorf("its command line is not one this farwing bench takes: %v", err)
	}
	return b.tables(), nil
}
