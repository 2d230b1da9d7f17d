package rlcc

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// FormatV1 is the "format" value of smartt's own tree-ensemble JSON (see docs/rlcc.md).
const FormatV1 = "smartt-rlcc-trees/1"

// Observation features a model may use, by name. The controller computes all of them on
// every decision; a model names the ones its splits read, in the order of its "features".
const (
	FeatDelta       = iota // delta_t = target - max(rtt/brtt - beta, 0) * sqrt(rate)
	FeatDeltaPrev          // delta_{t-1}
	FeatActionPrev         // a_{t-1}, the previous action (rate multiplier)
	FeatActionPrev2        // a_{t-2}
	FeatRate               // the rate normalised to line rate
	NumFeatures
)

// FeatureNames are the model-file names of the observation features, by index.
var FeatureNames = [NumFeatures]string{"delta", "delta_prev", "action_prev", "action_prev2", "rate"}

// Split is one level of an oblivious tree: bit d of the leaf index is set iff
// feature > border (CatBoost's convention).
type Split struct {
	Feature int     `json:"feature"` // index into Model.Features
	Border  float64 `json:"border"`
}

// Tree is an oblivious (symmetric) tree: every node of a level applies the same split,
// so the tree is its list of splits and 2^len(Splits) leaves.
type Tree struct {
	Splits []Split   `json:"splits"`
	Leaves []float64 `json:"leaves"`
}

// Model is a tree ensemble in smartt's JSON format: action = Bias + sum of one leaf per tree.
type Model struct {
	Format   string         `json:"format"`
	Features []string       `json:"features"` // names from FeatureNames, in split-index order
	Bias     float64        `json:"bias"`
	Trees    []Tree         `json:"trees"`
	Meta     map[string]any `json:"meta,omitempty"` // provenance (generator, teacher, fit error)
}

// Limits bound a model's size (the ConnectX-6Dx budget is 10 trees of depth 4).
type Limits struct {
	MaxTrees int `yaml:"max_trees"`
	MaxDepth int `yaml:"max_depth"`
}

// DefaultLimits are the paper's: at most 10 trees of depth at most 4.
var DefaultLimits = Limits{MaxTrees: 10, MaxDepth: 4}

// ParseModel decodes a model in smartt's JSON format and checks it against lim.
func ParseModel(b []byte, lim Limits) (*Model, error) {
	var m Model
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("rlcc model: %w", err)
	}
	if m.Format != FormatV1 {
		return nil, fmt.Errorf("rlcc model: format = %q: want %q", m.Format, FormatV1)
	}
	if err := m.Validate(lim); err != nil {
		return nil, err
	}
	return &m, nil
}

// Marshal encodes m in smartt's JSON format, indented.
func (m *Model) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Validate checks the structure and the limits, naming what is wrong.
func (m *Model) Validate(lim Limits) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("rlcc model: "+format, a...)) }
	if lim.MaxTrees < 1 || lim.MaxDepth < 1 || lim.MaxDepth > 8 {
		bad("limits max_trees = %d, max_depth = %d: need max_trees >= 1 and max_depth in 1..8", lim.MaxTrees, lim.MaxDepth)
	}
	if len(m.Features) == 0 || len(m.Features) > NumFeatures {
		bad("features: %d names, must be 1..%d", len(m.Features), NumFeatures)
	}
	for i, f := range m.Features {
		if featureIndex(f) < 0 {
			bad("features[%d] = %q: must be one of %s", i, f, strings.Join(FeatureNames[:], ", "))
		}
	}
	if len(m.Trees) == 0 || len(m.Trees) > lim.MaxTrees {
		bad("%d trees: must be 1..%d (max_trees)", len(m.Trees), lim.MaxTrees)
	}
	if !finite(m.Bias) {
		bad("bias is not finite")
	}
	for t, tr := range m.Trees {
		if len(tr.Splits) == 0 || len(tr.Splits) > lim.MaxDepth {
			bad("trees[%d]: depth %d: must be 1..%d (max_depth)", t, len(tr.Splits), lim.MaxDepth)
			continue
		}
		if len(tr.Leaves) != 1<<len(tr.Splits) {
			bad("trees[%d]: %d leaves: a tree of depth %d has %d", t, len(tr.Leaves), len(tr.Splits), 1<<len(tr.Splits))
		}
		for d, s := range tr.Splits {
			if s.Feature < 0 || s.Feature >= len(m.Features) {
				bad("trees[%d].splits[%d].feature = %d: must be in 0..%d", t, d, s.Feature, len(m.Features)-1)
			}
			if !finite(s.Border) || math.Abs(s.Border) >= maxAbsFixed {
				bad("trees[%d].splits[%d].border = %g: must be finite with |border| < %g", t, d, s.Border, maxAbsFixed)
			}
		}
		for i, v := range tr.Leaves {
			if !finite(v) || math.Abs(v) >= maxAbsFixed {
				bad("trees[%d].leaves[%d] = %g: must be finite with |value| < %g", t, i, v, maxAbsFixed)
			}
		}
	}
	return errors.Join(errs...)
}

// PredictFloat is the float64 reference evaluation on observation x (indexed by the
// Feat constants): the fixed-point Ensemble must agree with it (docs/rlcc.md).
func (m *Model) PredictFloat(x *[NumFeatures]float64) float64 {
	sum := m.Bias
	for _, tr := range m.Trees {
		idx := 0
		for d, s := range tr.Splits {
			if x[featureIndex(m.Features[s.Feature])] > s.Border {
				idx |= 1 << d
			}
		}
		sum += tr.Leaves[idx]
	}
	return sum
}

func featureIndex(name string) int {
	for i, n := range FeatureNames {
		if n == name {
			return i
		}
	}
	return -1
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
