package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DecodeYAML decodes data into out strictly and reports every problem at once, each
// naming its YAML key path, the value and what is allowed:
//
//	transport.min_rtoo: unknown key (line 3); did you mean min_rto?
//	udp.recv_buffer: "8XB" is not a size (want bytes or e.g. 8MiB, 4k, 1G, 1GB) (line 5)
//	listen: "127.0.0.1": ParseAddrPort("127.0.0.1"): not an ip:port (line 1)
//
// An integer field tagged `unit:"bytes"` also reads ParseSize's units ("8MiB"). An empty
// document keeps out as it is (the defaults).
func DecodeYAML(data []byte, out any) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	if root.Kind == 0 || len(root.Content) == 0 {
		return nil // an empty file keeps the defaults
	}
	var errs []error
	check(&root, reflect.TypeOf(out), "", &errs)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// check rewrote sizes with units to plain integers: decode the rewritten tree.
	b, err := yaml.Marshal(&root)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

var (
	yamlUnmarshaler = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// check walks n against the Go type t, appending an error for every unknown key and every
// value that does not decode into its field, and rewriting byte sizes with units.
func check(n *yaml.Node, t reflect.Type, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			check(c, t, path, errs)
		}
		return
	}
	if n.Kind == yaml.AliasNode || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(yamlUnmarshaler) || pt.Implements(textUnmarshaler) || n.Kind == yaml.ScalarNode {
		decodeLeaf(n, t, path, errs)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, fmt.Errorf("%s: want a mapping of keys, not a %s (line %d)", orTop(path), kindName(n.Kind), n.Line))
			return
		}
		checkStruct(n, t, path, errs)
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			*errs = append(*errs, fmt.Errorf("%s: want a list, not a %s (line %d)", orTop(path), kindName(n.Kind), n.Line))
			return
		}
		for i, c := range n.Content {
			check(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			*errs = append(*errs, fmt.Errorf("%s: want a mapping, not a %s (line %d)", orTop(path), kindName(n.Kind), n.Line))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), errs)
		}
	}
}

// checkStruct checks a mapping against struct type t.
func checkStruct(n *yaml.Node, t reflect.Type, path string, errs *[]error) {
	fields := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			*errs = append(*errs, unknownKey(p, k, fields))
			continue
		}
		if f.Tag.Get("unit") == "bytes" && v.Kind == yaml.ScalarNode && isInt(f.Type) {
			if _, err := strconv.ParseInt(v.Value, 10, 64); err != nil {
				size, err := ParseSize(v.Value)
				if err != nil {
					*errs = append(*errs, fmt.Errorf("%s: %v (line %d)", p, err, v.Line))
					continue
				}
				v.Value, v.Tag, v.Style = strconv.FormatInt(size, 10), "!!int", 0
			}
		}
		check(v, f.Type, p, errs)
	}
}

// decodeLeaf decodes n into a fresh value of type t and reports a refusal under path.
func decodeLeaf(n *yaml.Node, t reflect.Type, path string, errs *[]error) {
	if t.Kind() == reflect.Interface {
		return
	}
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return
	}
	var ve *valueError
	if errors.As(err, &ve) {
		err = ve.err
	} else if n.Kind == yaml.ScalarNode {
		msg := leafError(err, t).Error()
		if !strings.Contains(msg, strconv.Quote(n.Value)) {
			msg = strconv.Quote(n.Value) + ": " + msg
		}
		err = errors.New(msg + hints[t])
	}
	*errs = append(*errs, fmt.Errorf("%s: %v (line %d)", orTop(path), err, n.Line))
}

// hints say what a value of a standard type looks like.
var hints = map[reflect.Type]string{
	reflect.TypeFor[netip.AddrPort](): "; want ADDRESS:PORT such as 0.0.0.0:23600 or [::]:23600",
	reflect.TypeFor[netip.Addr]():     "; want an IP address such as 10.0.0.1 or fd00::1",
	reflect.TypeFor[netip.Prefix]():   "; want an address prefix such as 10.0.1.0/24",
}

// leafError words yaml's type errors ("cannot unmarshal !!str `x` into int") for a user.
func leafError(err error, t reflect.Type) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	switch {
	case isInt(t):
		if strings.Contains(te.Errors[0], "!!int") {
			if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
				return fmt.Errorf("must be in 0..%d", uint64(1)<<t.Bits()-1)
			}
			return fmt.Errorf("must be in %d..%d", -(int64(1) << (t.Bits() - 1)), int64(1)<<(t.Bits()-1)-1)
		}
		return fmt.Errorf("want an integer")
	case t.Kind() == reflect.Bool:
		return fmt.Errorf("want true or false")
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return fmt.Errorf("want a number")
	case t.Kind() == reflect.String:
		return fmt.Errorf("want a string")
	}
	msg := te.Errors[0]
	if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return errors.New(msg)
}

// yamlFields maps a struct's YAML keys to its fields, inline structs included.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					m[k] = v
				}
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f
	}
	return m
}

// unknownKey is the error for key k at path p: the closest known key, or the list.
func unknownKey(p string, k *yaml.Node, fields map[string]reflect.StructField) error {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names)
	if best := closest(k.Value, names); best != "" {
		return fmt.Errorf("%s: unknown key (line %d); did you mean %s?", p, k.Line, best)
	}
	return fmt.Errorf("%s: unknown key (line %d); known keys here: %s", p, k.Line, strings.Join(names, ", "))
}

// closest returns the name nearest to s by edit distance, if near enough to be a typo.
func closest(s string, names []string) string {
	best, bestD := "", len(s)/3+2
	for _, n := range names {
		if d := editDistance(strings.ToLower(s), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}
