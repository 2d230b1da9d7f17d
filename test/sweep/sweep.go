// Package sweep runs a simulator scenario over a grid of field values and seeds and
// summarises the runs in one table (mean, min, max and standard deviation over seeds of
// every metric of the summary), as CSV, JSON and a plot: the engine of "smartt-lab sim
// sweep" and "smartt-lab testbed sweep" (docs/sim.md, "Research workflow"). Every run is one
// job (point x seed) that can execute anywhere and write its own file; Merge combines
// the files, so a sweep can run as a batch scheduler's job array.
package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/smartt-transport/smartt/test/sim"
	"github.com/smartt-transport/smartt/test/sim/scenarios"
	"github.com/smartt-transport/smartt/transport"
)

// MaxJobs bounds points x seeds of one sweep (a typo in an axis should not queue a
// million runs).
const MaxJobs = 100_000

// Axis is one swept scenario field and its values.
type Axis struct {
	Field  string   `json:"field"`  // dotted YAML path: transport.cc, topology.oversubscription, failures[0].rate
	Values []string `json:"values"` // YAML values as given
}

// String is the axis as -set takes it.
func (a Axis) String() string { return a.Field + "=" + strings.Join(a.Values, ",") }

// ParseAxis reads "field=v1,v2,...". Commas inside [] or {} do not split, so a value may
// be a YAML flow sequence or mapping.
func ParseAxis(s string) (Axis, error) {
	field, vals, ok := strings.Cut(s, "=")
	field = strings.TrimSpace(field)
	if !ok || field == "" {
		return Axis{}, fmt.Errorf("-set %q: want FIELD=VALUE[,VALUE...], e.g. transport.cc=smartt,swift", s)
	}
	if _, err := splitPath(field); err != nil {
		return Axis{}, fmt.Errorf("-set %s: %w", field, err)
	}
	a := Axis{Field: field}
	depth, start := 0, 0
	for i := 0; i <= len(vals); i++ {
		if i < len(vals) {
			switch vals[i] {
			case '[', '{':
				depth++
			case ']', '}':
				depth--
			}
			if vals[i] != ',' || depth > 0 {
				continue
			}
		}
		v := strings.TrimSpace(vals[start:i])
		if v == "" {
			return Axis{}, fmt.Errorf("-set %s: empty value in %q", field, vals)
		}
		a.Values = append(a.Values, v)
		start = i + 1
	}
	return a, nil
}

// Spec is a sweep: a scenario, the axes of its grid and the seeds run at every point.
type Spec struct {
	Scenario string `json:"scenario"`        // file path or shipped scenario name, as given
	SHA256   string `json:"scenario_sha256"` // of the scenario file's bytes
	Axes     []Axis `json:"axes"`            // the grid; the first axis varies slowest
	Seeds    int    `json:"seeds"`           // runs per point: the point's seed, seed+1, ...

	src  []byte
	base yaml.Node
}

// LoadScenario reads a scenario file, or a shipped scenario by name (permutation_128)
// when no such file exists.
func LoadScenario(ref string) ([]byte, error) {
	b, err := os.ReadFile(ref)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) || strings.ContainsAny(ref, "/\\") {
		return nil, err
	}
	return scenarios.Read(ref)
}

// New checks a sweep: every point's scenario must decode strictly and name known
// algorithms, so a bad field or value is reported, naming it, before anything runs.
func New(scenario string, src []byte, axes []Axis, seeds int) (*Spec, error) {
	if seeds < 1 {
		return nil, fmt.Errorf("-seeds = %d: must be >= 1", seeds)
	}
	sum := sha256.Sum256(src)
	s := &Spec{Scenario: scenario, SHA256: hex.EncodeToString(sum[:]), Axes: axes, Seeds: seeds, src: src}
	if err := yaml.Unmarshal(src, &s.base); err != nil {
		return nil, fmt.Errorf("%s: %w", scenario, err)
	}
	seen := map[string]bool{}
	n := seeds
	for _, a := range axes {
		if seen[a.Field] {
			return nil, fmt.Errorf("-set %s: field given twice", a.Field)
		}
		seen[a.Field] = true
		if len(a.Values) == 0 {
			return nil, fmt.Errorf("-set %s: no values", a.Field)
		}
		n *= len(a.Values)
		if n > MaxJobs {
			return nil, fmt.Errorf("sweep: more than %d runs (points x seeds)", MaxJobs)
		}
	}
	// Each value is checked once, with the other axes at their first value: enough to
	// name a bad field or value without decoding the whole grid.
	for i, a := range axes {
		for j := range a.Values {
			vals := make([]string, len(axes))
			for k := range axes {
				vals[k] = axes[k].Values[0]
			}
			vals[i] = a.Values[j]
			if _, err := s.scenarioAt(vals); err != nil {
				return nil, err
			}
		}
	}
	if len(axes) == 0 {
		if _, err := s.scenarioAt(nil); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Source is the scenario file's bytes.
func (s *Spec) Source() []byte { return s.src }

// ID identifies the sweep (scenario bytes, axes, seeds): runs of one sweep share it.
func (s *Spec) ID() string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Points is the number of grid points (the product of the axes' lengths).
func (s *Spec) Points() int {
	n := 1
	for _, a := range s.Axes {
		n *= len(a.Values)
	}
	return n
}

// Jobs is the number of runs: points x seeds. Job k is point k / Seeds, seed index k % Seeds.
func (s *Spec) Jobs() int { return s.Points() * s.Seeds }

// Values are point p's axis values; the first axis varies slowest.
func (s *Spec) Values(p int) []string {
	vals := make([]string, len(s.Axes))
	for i := len(s.Axes) - 1; i >= 0; i-- {
		n := len(s.Axes[i].Values)
		vals[i] = s.Axes[i].Values[p%n]
		p /= n
	}
	return vals
}

// Label is "field=value ..." of point p.
func (s *Spec) Label(p int) string {
	var parts []string
	for i, v := range s.Values(p) {
		parts = append(parts, s.Axes[i].Field+"="+v)
	}
	return strings.Join(parts, " ")
}

// Job builds job k's scenario: point k / Seeds with the point's seed plus k % Seeds.
func (s *Spec) Job(k int) (point int, sc *sim.Scenario, err error) {
	if k < 0 || k >= s.Jobs() {
		return 0, nil, fmt.Errorf("-job %d: the sweep has jobs 0..%d", k, s.Jobs()-1)
	}
	point = k / s.Seeds
	sc, err = s.scenarioAt(s.Values(point))
	if err != nil {
		return 0, nil, err
	}
	sc.Seed += uint64(k % s.Seeds)
	return point, sc, nil
}

func (s *Spec) scenarioAt(vals []string) (*sim.Scenario, error) {
	var doc yaml.Node
	if err := copyNode(&doc, &s.base); err != nil {
		return nil, err
	}
	for i, v := range vals {
		if err := set(&doc, s.Axes[i].Field, v); err != nil {
			return nil, fmt.Errorf("-set %s=%s: %w", s.Axes[i].Field, v, err)
		}
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, err
	}
	sc, err := sim.ParseScenario(b)
	if err != nil {
		return nil, fmt.Errorf("%s with %s: %w", s.Scenario, pointLabel(s.Axes, vals), err)
	}
	// The engine checks algorithm names only when it starts; check them now.
	if sc.Transport.CC != "" && !slices.Contains(transport.CCNames(), sc.Transport.CC) {
		return nil, fmt.Errorf("transport.cc = %q: must be one of %s", sc.Transport.CC, strings.Join(transport.CCNames(), ", "))
	}
	if sc.Transport.LB != "" && !slices.Contains(transport.LBNames(), sc.Transport.LB) {
		return nil, fmt.Errorf("transport.lb = %q: must be one of %s", sc.Transport.LB, strings.Join(transport.LBNames(), ", "))
	}
	return sc, nil
}

func pointLabel(axes []Axis, vals []string) string {
	var parts []string
	for i, v := range vals {
		parts = append(parts, axes[i].Field+"="+v)
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, " ")
}

func copyNode(dst, src *yaml.Node) error {
	b, err := yaml.Marshal(src)
	if err != nil {
		return err
	}
	if src.Kind == 0 { // an empty file
		return nil
	}
	return yaml.Unmarshal(b, dst)
}

// pathStep is one step of a field path: a mapping key, or a sequence index (key "").
type pathStep struct {
	key   string
	index int
}

// splitPath reads "a.b[2].c".
func splitPath(path string) ([]pathStep, error) {
	var steps []pathStep
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key == "" {
			return nil, fmt.Errorf("field path %q: empty name", path)
		}
		steps = append(steps, pathStep{key: key})
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(num)
			if !ok || err != nil || i < 0 || (after != "" && after[0] != '[') {
				return nil, fmt.Errorf("field path %q: bad index in %q", path, part)
			}
			steps = append(steps, pathStep{index: i})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return steps, nil
}

// set puts value (parsed as YAML) at path in doc, creating mappings on the way; whether
// the field exists is left to the strict decode that follows.
func set(doc *yaml.Node, path, value string) error {
	steps, err := splitPath(path)
	if err != nil {
		return err
	}
	var v yaml.Node
	if err := yaml.Unmarshal([]byte(value), &v); err != nil {
		return fmt.Errorf("value %q is not YAML: %w", value, err)
	}
	val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: ""}
	if v.Kind == yaml.DocumentNode && len(v.Content) == 1 {
		val = v.Content[0]
	}
	if doc.Kind == 0 {
		*doc = yaml.Node{Kind: yaml.DocumentNode}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null" {
		doc.Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}
	}
	n := doc.Content[0]
	for i, st := range steps {
		last := i == len(steps)-1
		if st.key == "" {
			if n.Kind != yaml.SequenceNode || st.index >= len(n.Content) {
				return fmt.Errorf("%s: no element %d (the scenario has %d)", prefix(steps[:i]), st.index, len(n.Content))
			}
			if last {
				n.Content[st.index] = val
				return nil
			}
			n = n.Content[st.index]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s is not a mapping", prefix(steps[:i]))
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == st.key {
				next = n.Content[j+1]
				if last {
					n.Content[j+1] = val
					return nil
				}
			}
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			if last {
				next = val
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: st.key}, next)
			if last {
				return nil
			}
		}
		n = next
	}
	return nil
}

func prefix(steps []pathStep) string {
	var b strings.Builder
	for _, st := range steps {
		if st.key == "" {
			fmt.Fprintf(&b, "[%d]", st.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(st.key)
	}
	if b.Len() == 0 {
		return "the scenario"
	}
	return b.String()
}

// Run is one job's outcome, the file a job writes.
type Run struct {
	Sweep  *Spec           `json:"sweep"`    // the sweep it belongs to
	ID     string          `json:"sweep_id"` // Sweep.ID(): runs of one sweep share it
	Job    int             `json:"job"`      // point x Seeds + seed index
	Point  int             `json:"point"`    // grid point
	Values []string        `json:"values"`   // the point's axis values
	Seed   uint64          `json:"seed"`     // the run's seed
	Result json.RawMessage `json:"result"`   // the run's JSON summary (sim.Result)
	// FCT holds the completed flows' FCT quantiles 0, 1, ..., 100 % (ns, nearest rank):
	// the run's FCT CDF, so a merged sweep can draw CDFs and report the fastest flow.
	// Runs written before it existed have none.
	FCT []int64 `json:"fct_quantiles_ns,omitempty"`
}

// FCTQuantiles returns the completed flows' FCT at 0, 1, ..., 100 % (nearest rank), or nil
// when no flow completed.
func FCTQuantiles(flows []sim.FlowResult) []int64 {
	var f []int64
	for i := range flows {
		if flows[i].FCT >= 0 && !flows[i].Failed {
			f = append(f, flows[i].FCT)
		}
	}
	if len(f) == 0 {
		return nil
	}
	slices.Sort(f)
	q := make([]int64, 101)
	for p := range q {
		// Nearest rank: the smallest FCT with at least p % of the flows at or below it.
		k := (p*len(f) + 99) / 100
		q[p] = f[max(k-1, 0)]
	}
	return q
}

// Adopt returns r renumbered as a job of s when r ran the same scenario file with the same
// value of every axis field (r's sweep may cover more values, or list the axes in another
// order) and the seed of one of s's jobs at that point: a run is deterministic, so a
// sweep can take another's runs instead of repeating them (-reuse).
func (s *Spec) Adopt(r *Run) (*Run, bool) {
	if r.Sweep == nil || r.Sweep.SHA256 != s.SHA256 || len(r.Sweep.Axes) != len(s.Axes) || len(r.Values) != len(r.Sweep.Axes) {
		return nil, false
	}
	theirs := map[string]string{}
	for i, a := range r.Sweep.Axes {
		theirs[a.Field] = r.Values[i]
	}
	vals := make([]string, len(s.Axes))
	point := 0
	for i, a := range s.Axes {
		v, ok := theirs[a.Field]
		j := slices.Index(a.Values, v)
		if !ok || j < 0 {
			return nil, false
		}
		vals[i] = v
		point = point*len(a.Values) + j
	}
	for si := range s.Seeds {
		k := point*s.Seeds + si
		if _, sc, err := s.Job(k); err == nil && sc.Seed == r.Seed {
			c := *r
			c.Sweep, c.ID, c.Job, c.Point, c.Values = s, s.ID(), k, point, vals
			return &c, true
		}
	}
	return nil, false
}

// NewRun records job k's result.
func (s *Spec) NewRun(k int, r *sim.Result) (*Run, error) {
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		return nil, err
	}
	return &Run{Sweep: s, ID: s.ID(), Job: k, Point: k / s.Seeds, Values: s.Values(k / s.Seeds), Seed: r.Seed,
		Result: json.RawMessage(bytes.TrimSpace(b.Bytes())), FCT: FCTQuantiles(r.PerFlow)}, nil
}
