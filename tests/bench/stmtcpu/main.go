// Command stmtcpu measures the backend CPU per execution of prepared
// statements: each statement on its own connection, executed in turns of
// -batch executions (statement A, B, C, A, B, …), so that all of them see
// the same machine; CPU is the utime+stime of each connection's Postgres
// backend (/proc/<pid>/stat, so it runs on the Postgres host, as root).
// CPU time, not wall time: on a shared machine it moves far less than
// throughput does (docs/BENCHMARKS.md, "The check's statement").
//
// By default it compares the check's statement as committed ("main":
// checkViewSQL, read from adapters/postgres/tasks.go, so it cannot drift
// from the code) with a candidate ("candidate": -candidate FILE, a
// replacement for checkViewSQL, the devices aliased d, without the WHERE
// clause), both by token hash as the check runs them. Without -candidate
// the candidate is the committed statement itself: the two columns then
// differ only by the method's noise, which is worth knowing first. Run it
// from the repository's root:
//
//	go run ./tests/bench/stmtcpu -url postgres://…/ota_bench_stmt -candidate candidate.sql
//	go run ./tests/bench/stmtcpu -print     # the committed statement, for tests/bench/stmt.sh
//
// Any statements can be given instead, as name=SQL arguments ($1 takes
// the keys' values):
//
//	go run ./tests/bench/stmtcpu -url postgres://…/ota_bench_stmt \
//	    -keys "SELECT token_hash FROM devices WHERE random() < 0.09" \
//	    "a=SELECT … WHERE d.token_hash = \$1" "b=SELECT … WHERE d.token_hash = \$1"
//
// Cold (the default): every execution has its own key, none repeated, the
// keys split between the statements (so -keys must return more than -n
// keys per statement). -hot: every statement runs the same -hotkeys keys,
// once to warm them (everything in shared_buffers), then -n times in all.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	_ "github.com/lib/pq"
)

// ticks is the CPU time of process pid so far, in clock ticks.
func ticks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		panic(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	var u, s int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &s)
	return u + s
}

// variant is one statement under measurement, on its own connection.
type variant struct {
	name  string
	db    *sql.DB
	st    *sql.Stmt
	pid   int
	keys  []any
	next  int
	ticks int64
	n     int
	wall  time.Duration
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// committed is the string constant name of the Go file src as compiled:
// its string literals and the constants it names, concatenated (how
// checkViewSQL is written).
func committed(src, name string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), src, nil, 0)
	if err != nil {
		return "", err
	}
	consts := map[string]ast.Expr{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						consts[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	var eval func(e ast.Expr) (string, error)
	eval = func(e ast.Expr) (string, error) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind == token.STRING {
				return strconv.Unquote(e.Value)
			}
		case *ast.Ident:
			if v, ok := consts[e.Name]; ok {
				return eval(v)
			}
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				x, err := eval(e.X)
				if err != nil {
					return "", err
				}
				y, err := eval(e.Y)
				return x + y, err
			}
		}
		return "", fmt.Errorf("%s: %s: not a string constant of literals", src, name)
	}
	return eval(&ast.Ident{Name: name})
}

// candidate is the statement in file, without its trailing semicolon.
func candidate(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(strings.TrimSpace(string(b)), ";"), nil
}

func main() {
	url := flag.String("url", "", "database")
	keysQ := flag.String("keys", "SELECT token_hash FROM devices", "query returning the keys")
	src := flag.String("src", "adapters/postgres/tasks.go", "the Go file that holds the check's statement")
	cand := flag.String("candidate", "", "file holding the candidate for checkViewSQL (default: checkViewSQL itself)")
	printOnly := flag.Bool("print", false, "print the committed checkViewSQL and exit")
	text := flag.Bool("text", false, "keys are text")
	n := flag.Int("n", 20000, "executions per statement")
	batch := flag.Int("batch", 200, "executions per turn")
	hot := flag.Bool("hot", false, "every statement uses the same keys, each warmed first (all cached)")
	hotKeys := flag.Int("hotkeys", 5000, "keys in hot mode")
	flag.Parse()
	args := flag.Args()
	if *printOnly || len(args) == 0 {
		stmt, err := committed(*src, "checkViewSQL")
		if err != nil {
			panic(err)
		}
		if *printOnly {
			fmt.Println(stmt)
			return
		}
		other := stmt
		if *cand != "" {
			if other, err = candidate(*cand); err != nil {
				panic(err)
			}
		}
		const where = " WHERE d.token_hash = $1"
		args = []string{"main=" + stmt + where, "candidate=" + other + where}
	}
	var vs []*variant
	for _, a := range args { // name=SQL
		name, q, ok := strings.Cut(a, "=")
		if !ok {
			panic("want name=SQL, got " + a)
		}
		db, err := sql.Open("postgres", *url)
		if err != nil {
			panic(err)
		}
		db.SetMaxOpenConns(1)
		st, err := db.Prepare(q)
		if err != nil {
			panic(fmt.Sprint(name, err))
		}
		v := &variant{name: name, db: db, st: st}
		if err := db.QueryRow(`SELECT pg_backend_pid()`).Scan(&v.pid); err != nil {
			panic(err)
		}
		vs = append(vs, v)
	}
	rows, err := vs[0].db.Query(*keysQ)
	if err != nil {
		panic(err)
	}
	var all []any
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			panic(err)
		}
		if *text {
			all = append(all, string(k))
		} else {
			all = append(all, k)
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	exec := func(v *variant, k any) {
		r, err := v.st.Query(k)
		if err != nil {
			panic(err)
		}
		got := 0
		for r.Next() {
			got++
		}
		r.Close()
		if got != 1 {
			panic(fmt.Sprintf("%s: %d rows", v.name, got))
		}
	}
	for i, v := range vs {
		if *hot {
			v.keys = all[:*hotKeys]
			for _, k := range v.keys { // warm (and plan: custom, then generic)
				exec(v, k)
			}
		} else {
			per := len(all) / len(vs)
			if per < *n+10 {
				panic(fmt.Sprintf("%d keys: too few", len(all)))
			}
			v.keys = all[i*per : (i+1)*per]
			for _, k := range v.keys[:10] {
				exec(v, k)
			}
			v.next = 10
		}
	}
	for done := false; !done; {
		done = true
		for _, v := range vs {
			if v.n >= *n {
				continue
			}
			done = false
			t0, w0 := ticks(v.pid), time.Now()
			for range *batch {
				exec(v, v.keys[v.next%len(v.keys)])
				v.next++
				v.n++
			}
			v.wall += time.Since(w0)
			v.ticks += ticks(v.pid) - t0
		}
	}
	l, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("wall µs per execution (load-sensitive):")
	for _, v := range vs {
		fmt.Printf(" %s=%.1f", v.name, float64(v.wall.Microseconds())/float64(v.n))
	}
	fmt.Println()
	names := make([]string, 0, len(vs))
	for _, v := range vs {
		names = append(names, fmt.Sprintf("%s=%.1f", v.name, float64(v.ticks)*1e6/clockTicks/float64(v.n)))
	}
	fmt.Printf("n=%d hot=%v load=%s backend CPU µs per execution: %s\n", *n, *hot, strings.Fields(string(l))[0], strings.Join(names, " "))
}
