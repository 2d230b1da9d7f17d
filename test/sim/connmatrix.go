package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/smartt-transport/smartt/config"
)

// FlowSpec is one flow of a listed workload: src sends size bytes to dst at start.
type FlowSpec struct {
	Src   int             `yaml:"src"`   // sending host
	Dst   int             `yaml:"dst"`   // receiving host
	Start config.Duration `yaml:"start"` // when the flow starts
	Size  Size            `yaml:"size"`  // message bytes
}

// Limits of a connection matrix.
const (
	MaxMatrixFlows   = 1 << 20 // connections one matrix may list
	MaxMatrixLines   = 1 << 21 // lines, comments and blanks included
	maxMatrixLineLen = 1 << 12 // bytes per line
)

// ParseConnectionMatrix reads htsim's connection-matrix text format, so that the traffic
// matrices published with the papers replay unchanged:
//
//	Nodes 128
//	Connections 2
//	0->5 start 0 size 2000000
//	3->7 id 2 start 12.5 size 4096
//
// A connection line is "src->dst" followed by keyword-value pairs: start (microseconds,
// as htsim's ConnectionMatrix::save writes it; truncated to whole microseconds, as htsim's
// drivers do), size (bytes), and the ignored id and prio. Blank lines and lines starting with # are skipped; "Triggers 0" and "Failures 0"
// headers are accepted, but triggers and failures themselves are not supported. Node ids
// must be below both Nodes and hosts, and sizes in 1..maxMessage. Errors name the line.
func ParseConnectionMatrix(r io.Reader, hosts, maxMessage int) ([]FlowSpec, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxMatrixLineLen)
	nodes, declared := -1, -1
	var flows []FlowSpec
	line := 0
	bad := func(format string, a ...any) error {
		return fmt.Errorf("connection matrix line %d: %s", line, fmt.Sprintf(format, a...))
	}
	for sc.Scan() {
		line++
		if line > MaxMatrixLines {
			return nil, bad("more than %d lines", MaxMatrixLines)
		}
		tok := strings.Fields(sc.Text())
		if len(tok) == 0 || strings.HasPrefix(tok[0], "#") {
			continue
		}
		src, dst, isConn := strings.Cut(tok[0], "->")
		if !isConn {
			if len(tok) != 2 {
				return nil, bad("%q: want a header (Nodes N, Connections C) or src->dst", sc.Text())
			}
			n, err := strconv.Atoi(tok[1])
			if err != nil || n < 0 {
				return nil, bad("%s %q: want a non-negative integer", tok[0], tok[1])
			}
			if len(flows) > 0 {
				return nil, bad("header %s after the first connection", tok[0])
			}
			switch tok[0] {
			case "Nodes":
				if n < 2 || n > hosts {
					return nil, bad("Nodes %d: must be in 2..%d (the topology's hosts)", n, hosts)
				}
				nodes = n
			case "Connections":
				if n > MaxMatrixFlows {
					return nil, bad("Connections %d: at most %d", n, MaxMatrixFlows)
				}
				declared = n
			case "Triggers", "Failures":
				if n != 0 {
					return nil, bad("%s %d: triggers and failures are not supported (use the scenario's failures)", tok[0], n)
				}
			default:
				return nil, bad("unknown header %q", tok[0])
			}
			continue
		}
		if nodes < 0 || declared < 0 {
			return nil, bad("connection before the Nodes and Connections headers")
		}
		if len(flows) == declared {
			return nil, bad("more connections than the %d declared", declared)
		}
		var f FlowSpec
		var err error
		if f.Src, err = nodeID(src, nodes); err != nil {
			return nil, bad("source %v", err)
		}
		if f.Dst, err = nodeID(dst, nodes); err != nil {
			return nil, bad("destination %v", err)
		}
		if f.Src == f.Dst {
			return nil, bad("%d->%d: a host cannot send to itself", f.Src, f.Dst)
		}
		haveStart, haveSize := false, false
		for i := 1; i < len(tok); i += 2 {
			if i+1 >= len(tok) {
				return nil, bad("%q has no value", tok[i])
			}
			v := tok[i+1]
			switch tok[i] {
			case "start":
				us, err := strconv.ParseFloat(v, 64)
				if err != nil || !(us >= 0) || us > float64(math.MaxInt64/2)/1e3 {
					return nil, bad("start %q: want microseconds >= 0", v)
				}
				// Whole microseconds, as htsim starts it (timeFromUs((uint32_t)start)).
				f.Start, haveStart = config.Duration(int64(us)*1000), true
			case "size":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n < 1 || n > int64(maxMessage) {
					return nil, bad("size %q: want bytes in 1..%d (transport.max_message)", v, maxMessage)
				}
				f.Size, haveSize = Size(n), true
			case "id", "prio":
				if _, err := strconv.Atoi(v); err != nil {
					return nil, bad("%s %q: want an integer", tok[i], v)
				}
			case "trigger", "send_done_trigger", "recv_done_trigger":
				return nil, bad("%s: triggers are not supported", tok[i])
			default:
				return nil, bad("unknown keyword %q", tok[i])
			}
		}
		if !haveStart || !haveSize {
			return nil, bad("%s needs start and size", tok[0])
		}
		flows = append(flows, f)
	}
	if err := sc.Err(); err != nil {
		line++
		return nil, bad("%v (longest line %d bytes)", err, maxMatrixLineLen)
	}
	if nodes < 0 || declared < 0 {
		return nil, fmt.Errorf("connection matrix: missing Nodes or Connections header")
	}
	if len(flows) != declared {
		return nil, fmt.Errorf("connection matrix: %d connections listed, %d declared", len(flows), declared)
	}
	return flows, nil
}

func nodeID(s string, nodes int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= nodes {
		return 0, fmt.Errorf("%q: want a node id in 0..%d", s, nodes-1)
	}
	return n, nil
}

// checkFlows validates inline flows (workload.flows) as the parser does a matrix.
func checkFlows(flows []FlowSpec, hosts, maxMessage int) error {
	if len(flows) == 0 || len(flows) > MaxMatrixFlows {
		return fmt.Errorf("workload.flows: %d flows, want 1..%d", len(flows), MaxMatrixFlows)
	}
	for i, f := range flows {
		switch {
		case f.Src < 0 || f.Src >= hosts || f.Dst < 0 || f.Dst >= hosts:
			return fmt.Errorf("workload.flows[%d]: src %d, dst %d: want hosts in 0..%d", i, f.Src, f.Dst, hosts-1)
		case f.Src == f.Dst:
			return fmt.Errorf("workload.flows[%d]: src = dst = %d: a host cannot send to itself", i, f.Src)
		case f.Size < 1 || int64(f.Size) > int64(maxMessage):
			return fmt.Errorf("workload.flows[%d]: size %d: want bytes in 1..%d (transport.max_message)", i, f.Size, maxMessage)
		case f.Start < 0:
			return fmt.Errorf("workload.flows[%d]: start %v: must be >= 0", i, f.Start)
		}
	}
	return nil
}
