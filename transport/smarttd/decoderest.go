package smarttd

import (
	"bytes"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/config"
)

// decodeRest decodes data over c with config.DecodeYAML. When that refuses some keys, it
// decodes the document again with those keys' lines blanked (so line numbers hold) and
// reports whether c now holds the rest, worth validating: -check-config then lists the
// range errors of the keys that decoded beside the refusals, instead of one kind per run.
// A document that is not YAML, or whose refusals cannot be cut out cleanly, leaves rest
// false.
func decodeRest(data []byte, c *Config) (rest bool, err error) {
	err = config.DecodeYAML(data, c)
	if err == nil {
		return true, nil
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return false, err
	}
	lines := bytes.Split(data, []byte("\n"))
	refused := leaves(err)
	if len(refused) > maxRefusals { // each costs a walk of the tree: bound the work
		return false, err
	}
	for _, e := range refused {
		m := lineRef.FindStringSubmatch(e.Error())
		if m == nil {
			return false, err
		}
		n, _ := strconv.Atoi(m[1])
		first, last := span(&root, n)
		if first == 0 || last > len(lines) {
			return false, err
		}
		for i := first; i <= last; i++ {
			lines[i-1] = nil
		}
	}
	try := *c
	if config.DecodeYAML(bytes.Join(lines, []byte("\n")), &try) != nil {
		return false, err
	}
	*c = try
	return true, err
}

// maxRefusals is the most refusals decodeRest cuts out; beyond, only they are reported.
const maxRefusals = 64

// lineRef finds the "(line N)" every refusal of config.DecodeYAML carries.
var lineRef = regexp.MustCompile(`\(line (\d+)\)`)

// leaves flattens joined errors.
func leaves(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}

// span returns the lines of the innermost mapping entry whose key or value starts on
// line n: from its key's line to the last line of its value (0, 0 if none).
func span(n *yaml.Node, line int) (first, last int) {
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 0 && i+1 < len(n.Content) {
			k, v := c, n.Content[i+1]
			if k.Line <= line && line <= lastLine(v) {
				if f, l := span(v, line); f != 0 {
					return f, l
				}
				if k.Line == line || v.Line == line {
					return k.Line, lastLine(v)
				}
			}
			continue
		}
		if n.Kind != yaml.MappingNode {
			if f, l := span(c, line); f != 0 {
				return f, l
			}
		}
	}
	return 0, 0
}

// lastLine is the last line a node's tree starts a node on.
func lastLine(n *yaml.Node) int {
	l := n.Line
	for _, c := range n.Content {
		l = max(l, lastLine(c))
	}
	return l
}
