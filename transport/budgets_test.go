package transport

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The engine's size budgets: a function is read in one screen, the per-packet handler
// stays a dispatcher, and conn keeps identity and wiring while its halves live in their
// own types. The test parses the package's non-test files, so a change that breaks a
// budget fails the test command, not a later review.
const (
	budgetFuncLines  = 120 // any function in transport/*.go
	budgetOnDataLine = 100 // (*Endpoint).onData
	budgetOnDataCyc  = 30  // its cyclomatic complexity
	budgetConnFields = 40  // conn's direct fields (an embedded half counts as one)
)

// funcStat is one function's size.
type funcStat struct {
	name  string
	lines int
	cyc   int
}

// engineFuncs parses transport/*.go (tests excluded) and measures every function.
func engineFuncs(t *testing.T) ([]funcStat, *ast.StructType) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []funcStat
	var connType *ast.StructType
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Body == nil {
					continue
				}
				n := d.Name.Name
				if d.Recv != nil && len(d.Recv.List) == 1 {
					n = recvName(d.Recv.List[0].Type) + "." + n
				}
				lines := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
				out = append(out, funcStat{name: n, lines: lines, cyc: cyclomatic(d)})
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == "conn" {
						connType, _ = ts.Type.(*ast.StructType)
					}
				}
			}
		}
	}
	return out, connType
}

func recvName(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	}
	return "?"
}

// cyclomatic is gocyclo's count: 1 + each if, for, range, non-default case and
// communication clause, && and ||.
func cyclomatic(fn *ast.FuncDecl) int {
	n := 1
	ast.Inspect(fn, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			n++
		case *ast.CaseClause:
			if x.List != nil {
				n++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				n++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				n++
			}
		}
		return true
	})
	return n
}

// connFields counts the struct's direct fields (a, b int counts two).
func connFields(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(len(f.Names), 1)
	}
	return n
}

func TestEngineBudgets(t *testing.T) {
	fs, ct := engineFuncs(t)
	if len(fs) < 100 || ct == nil {
		t.Fatalf("parsed %d functions, conn found %v: the checker no longer sees the engine", len(fs), ct != nil)
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].lines > fs[j].lines })
	var sawOnData bool
	for _, f := range fs {
		if f.lines > budgetFuncLines {
			t.Errorf("%s: %d lines, budget %d", f.name, f.lines, budgetFuncLines)
		}
		if f.name == "Endpoint.onData" {
			sawOnData = true
			if f.lines > budgetOnDataLine || f.cyc > budgetOnDataCyc {
				t.Errorf("onData: %d lines, complexity %d; budget %d, %d", f.lines, f.cyc, budgetOnDataLine, budgetOnDataCyc)
			}
		}
	}
	if !sawOnData {
		t.Error("Endpoint.onData not found: rename the budget with the function")
	}
	if n := connFields(ct); n > budgetConnFields {
		t.Errorf("conn has %d direct fields, budget %d: put new state in its half (send, receive, ACK holding)", n, budgetConnFields)
	}
	if testing.Verbose() {
		for _, f := range fs[:min(len(fs), 12)] {
			t.Logf("%-40s %4d lines  complexity %3d", f.name, f.lines, f.cyc)
		}
		t.Logf("conn: %d direct fields", connFields(ct))
	}
}

// The checker itself: a budget it enforces must be able to fail.
func TestEngineBudgetsChecker(t *testing.T) {
	src := `package p
func f(a, b bool) int {
	if a && b || a {
		return 1
	}
	for i := 0; i < 3; i++ {
		switch i {
		case 1:
		case 2, 3:
		default:
		}
	}
	return 0
}
type conn struct{ a, b int; c string; embedded }`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	fn := f.Decls[0].(*ast.FuncDecl)
	if got := cyclomatic(fn); got != 7 { // 1 + if + && + || + for + 2 cases
		t.Errorf("cyclomatic = %d, want 7", got)
	}
	st := f.Decls[1].(*ast.GenDecl).Specs[0].(*ast.TypeSpec).Type.(*ast.StructType)
	if got := connFields(st); got != 4 {
		t.Errorf("connFields = %d, want 4", got)
	}
}
