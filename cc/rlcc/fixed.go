package rlcc

import "math"

// Fixed-point format of every value in the decision path: Q24 (value * 2^24) in int64.
// Features, borders, leaves and actions all fit an int32 on a NIC (|value| < 128).
const (
	fracBits    = 24
	one         = int64(1) << fracBits
	maxAbsFixed = 128.0
)

// toFixed converts v to Q24, rounding to nearest.
func toFixed(v float64) int64 { return int64(math.Round(v * float64(one))) }

// toFixedBorder converts a split border so that the integer test x > b matches the float
// test as closely as Q24 allows: floor keeps "x > border" for x just above border.
func toFixedBorder(v float64) int64 { return int64(math.Floor(v * float64(one))) }

// FromFixed converts a Q24 value to float64 (for reports and tests, never in the decision path).
func FromFixed(v int64) float64 { return float64(v) / float64(one) }

// fsplit is one compiled split.
type fsplit struct {
	thr  int64
	feat uint8 // observation index (Feat constant)
}

// Ensemble is a Model compiled to integer-only inference: borders and leaves in Q24,
// splits laid out flat in evaluation order.
type Ensemble struct {
	bias   int64
	depth  []uint8
	splits []fsplit
	leaves []int64
	depth4 bool // every tree has depth 4: Predict takes the unrolled path
}

// Compile turns a validated model into its fixed-point form.
func Compile(m *Model) *Ensemble {
	e := &Ensemble{bias: toFixed(m.Bias), depth4: true}
	for _, tr := range m.Trees {
		e.depth4 = e.depth4 && len(tr.Splits) == 4
		e.depth = append(e.depth, uint8(len(tr.Splits)))
		for _, s := range tr.Splits {
			e.splits = append(e.splits, fsplit{thr: toFixedBorder(s.Border), feat: uint8(featureIndex(m.Features[s.Feature]))})
		}
		for _, v := range tr.Leaves {
			e.leaves = append(e.leaves, toFixed(v))
		}
	}
	return e
}

// Predict returns bias + the sum of one leaf per tree for observation x (Q24), with
// integer operations only.
func (e *Ensemble) Predict(x *[NumFeatures]int64) int64 {
	if e.depth4 {
		return e.predict4(x)
	}
	sum := e.bias
	sp := e.splits
	lv := e.leaves
	for _, d := range e.depth {
		idx := 0
		for j := range int(d) {
			s := sp[j]
			bit := 0
			if x[s.feat%NumFeatures] > s.thr {
				bit = 1
			}
			idx |= bit << j
		}
		sum += lv[idx]
		sp = sp[d:]
		lv = lv[1<<d:]
	}
	return sum
}

// predict4 is Predict for ensembles whose trees all have depth 4 (the default shape),
// unrolled and branch-free: the split outcomes of RTT samples are hard to predict.
func (e *Ensemble) predict4(x *[NumFeatures]int64) int64 {
	sum := e.bias
	sp := e.splits
	lv := e.leaves
	for len(sp) >= 4 && len(lv) >= 16 {
		b0, b1, b2, b3 := 0, 0, 0, 0
		if x[sp[0].feat%NumFeatures] > sp[0].thr {
			b0 = 1
		}
		if x[sp[1].feat%NumFeatures] > sp[1].thr {
			b1 = 2
		}
		if x[sp[2].feat%NumFeatures] > sp[2].thr {
			b2 = 4
		}
		if x[sp[3].feat%NumFeatures] > sp[3].thr {
			b3 = 8
		}
		sum += lv[(b0|b1|b2|b3)&15]
		sp = sp[4:]
		lv = lv[16:]
	}
	return sum
}

// predictCounted is Predict with an operation count (see docs/rlcc.md for the cost model):
// per split one compare and one index update; per tree one leaf load and one add.
func (e *Ensemble) predictCounted(x *[NumFeatures]int64, ops *int) int64 {
	sum := e.bias
	k, l := 0, 0
	for _, d := range e.depth {
		idx := 0
		for j := range int(d) {
			s := e.splits[k+j]
			*ops++ // compare
			if x[s.feat] > s.thr {
				idx |= 1 << j
			}
			*ops++ // index update (or/shift; one instruction with a shifted operand)
		}
		sum += e.leaves[l+idx]
		*ops += 2 // leaf load, add
		k += int(d)
		l += 1 << d
	}
	return sum
}

// Ops is the number of operations Predict performs, by the cost model of predictCounted.
func (e *Ensemble) Ops() int { return 2*len(e.splits) + 2*len(e.depth) }

// Trees returns the number of trees.
func (e *Ensemble) Trees() int { return len(e.depth) }

// Bytes is the packed size of the parameters on a NIC: per split a 1-byte feature index
// and a 4-byte border, 4 bytes per leaf, 1 byte of depth per tree and 4 bytes of bias.
func (e *Ensemble) Bytes() int { return 5*len(e.splits) + 4*len(e.leaves) + len(e.depth) + 4 }
