package rlccnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/smartt-transport/smartt/cc/rlcc"
)

// FormatMLP is the "format" value of a policy network file.
const FormatMLP = "smartt-rlcc-mlp/1"

// NetInputs names the policy network's inputs, the deployed RL-CC policy's 2-step history
// of (rtt_reward, action) (NVIDIA's RL-CC training code): rtt_reward = -12.5 * delta,
// clamped to [-0.8, RewardClamp]; actions in tanh units u (multiplier 1+0.2u or 1/(1-0.2u)).
var NetInputs = [NumNetInputs]string{"rtt_reward", "action_prev", "rtt_reward_prev", "action_prev2"}

// NumNetInputs is the policy network's input width.
const NumNetInputs = 4

// RewardClamp bounds the rtt_reward input: a lost packet is an RTT of 64 base RTTs, whose
// reward (hundreds) would saturate every hidden unit.
const RewardClamp = 8.0

// MaxStep is the largest relative rate change of one action (a = +-1): 20 %.
const MaxStep = 0.2

// Multiplier maps a tanh action u in [-1, 1] to the rate multiplier: 1 + 0.2u when u >= 0,
// 1/(1 - 0.2u) when u < 0 (so one decision changes the rate by at most 20 % either way).
func Multiplier(u float64) float64 {
	if u >= 0 {
		return 1 + MaxStep*u
	}
	return 1 / (1 - MaxStep*u)
}

// ActionUnits is Multiplier's inverse: the tanh action of a rate multiplier m > 0.
func ActionUnits(m float64) float64 {
	if m >= 1 {
		return (m - 1) / MaxStep
	}
	return (1 - 1/m) / MaxStep
}

// RTTReward is NVIDIA's scaled observation -delta/0.08 (= -12.5 delta), clamped to
// [-0.8, RewardClamp] (delta <= target = 0.064 gives rtt_reward >= -0.8).
func RTTReward(delta float64) float64 { return min(max(-12.5*delta, -0.8), RewardClamp) }

// NetInput builds the network input from the observation features (Feat constants, the
// ones the tree controller computes: delta, delta_prev, action_prev, action_prev2).
func NetInput(x *[rlcc.NumFeatures]float64) [NumNetInputs]float64 {
	return [NumNetInputs]float64{RTTReward(x[rlcc.FeatDelta]), ActionUnits(x[rlcc.FeatActionPrev]),
		RTTReward(x[rlcc.FeatDeltaPrev]), ActionUnits(x[rlcc.FeatActionPrev2])}
}

// MLP is the policy network: inputs -> hidden layers (tanh) -> 1 (tanh). All parameters
// live in one vector (Theta) so an optimiser updates them as one; Forward keeps its
// activations in scratch, so an MLP is used by one goroutine at a time (the simulator's).
type MLP struct {
	Sizes []int     // layer widths, inputs first, 1 last: [4, 12, 12, 1]
	Theta []float64 // per layer: weights (out x in, row-major), then biases
	act   [][]float64
	grad  [][]float64 // backprop scratch, per layer output
	off   []int       // offset of layer l's weights in Theta
}

// NewMLP returns a network of the given hidden widths with Glorot-uniform weights from a
// seeded generator; the output layer is scaled by 0.1 so an untrained policy starts near
// a = 0 (keep the rate).
func NewMLP(hidden []int, seed uint64) *MLP {
	sizes := append(append([]int{NumNetInputs}, hidden...), 1)
	n := 0
	for l := 1; l < len(sizes); l++ {
		n += sizes[l]*sizes[l-1] + sizes[l]
	}
	m := &MLP{Sizes: sizes, Theta: make([]float64, n)}
	m.init()
	rng := rand.New(rand.NewPCG(seed, 0x61c0ffee))
	for l := 1; l < len(sizes); l++ {
		in, out := sizes[l-1], sizes[l]
		lim := math.Sqrt(6 / float64(in+out))
		if l == len(sizes)-1 {
			lim *= 0.1
		}
		w := m.Theta[m.off[l-1] : m.off[l-1]+in*out]
		for i := range w {
			w[i] = lim * (2*rng.Float64() - 1)
		}
	}
	return m
}

// init sizes the scratch and offsets from Sizes.
func (m *MLP) init() {
	m.act = make([][]float64, len(m.Sizes))
	m.grad = make([][]float64, len(m.Sizes))
	m.off = make([]int, len(m.Sizes))
	o := 0
	for l, s := range m.Sizes {
		m.act[l] = make([]float64, s)
		m.grad[l] = make([]float64, s)
		if l > 0 {
			m.off[l-1] = o
			o += s*m.Sizes[l-1] + s
		}
	}
	m.off[len(m.Sizes)-1] = o
}

// layer returns the weight matrix (row-major, Sizes[l] rows of Sizes[l-1]) and bias
// vector of layer l (1-based: inputs to layer l) as views of theta (Theta, or a gradient
// of the same shape).
func (m *MLP) layer(theta []float64, l int) (w, b []float64) {
	in, out := m.Sizes[l-1], m.Sizes[l]
	o := m.off[l-1]
	return theta[o : o+in*out], theta[o+in*out : o+in*out+out]
}

// Forward returns a = tanh(output) for input x, in [-1, 1]. No allocation.
func (m *MLP) Forward(x *[NumNetInputs]float64) float64 {
	copy(m.act[0], x[:])
	for l := 1; l < len(m.Sizes); l++ {
		w, b := m.layer(m.Theta, l)
		y := m.act[l]
		copy(y, b)
		addMatVec(y, w, m.act[l-1])
		for i, v := range y {
			y[i] = math.Tanh(v)
		}
	}
	return m.act[len(m.Sizes)-1][0]
}

// addMatVec adds w x to y (w row-major, len(y) rows of len(x)), rounding as the BLAS
// kernels the policy was trained with do (gonum's amd64 Dgemv, y = 1 w x + 1 y), so that
// a trained policy's actions are reproduced bit for bit: each row's products go to two
// partial sums, the even and the odd columns, in column order; the sums are added, a last
// odd column after that (before it in the last row of an odd row count), then y. The
// train package's test compares it with the BLAS on every shape up to 9 x 40.
func addMatVec(y, w, x []float64) {
	rows, cols := len(y), len(x)
	pairs := cols &^ 1
	for r := range rows {
		row := w[r*cols : (r+1)*cols]
		var even, odd float64
		for c := 0; c < pairs; c += 2 {
			even += row[c] * x[c]
			odd += row[c+1] * x[c+1]
		}
		var s float64
		switch {
		case cols == pairs:
			s = even + odd
		case r == rows-1 && rows%2 == 1: // gonum's one-row kernel
			s = (even + row[pairs]*x[pairs]) + odd
		default:
			s = (even + odd) + row[pairs]*x[pairs]
		}
		y[r] += s
	}
}

// AccumGrad adds scale * d a(x) / d theta to g (len(Theta)) and returns a(x).
func (m *MLP) AccumGrad(x *[NumNetInputs]float64, scale float64, g []float64) float64 {
	a := m.Forward(x)
	L := len(m.Sizes) - 1
	m.grad[L][0] = scale * (1 - a*a)
	for l := L; l >= 1; l-- {
		gw, gb := m.layer(g, l)
		d, prev := m.grad[l], m.act[l-1]
		for i, di := range d { // gw += d prev^T, gb += d
			row := gw[i*len(prev) : (i+1)*len(prev)]
			for j, p := range prev {
				row[j] += di * p
			}
			gb[i] += di
		}
		if l > 1 {
			w, _ := m.layer(m.Theta, l)
			gp := m.grad[l-1]
			clear(gp)
			for i, di := range d { // gp = w^T d, row by row as the BLAS adds
				for j, wij := range w[i*len(gp) : (i+1)*len(gp)] {
					gp[j] += wij * di
				}
			}
			for i, h := range m.act[l-1] {
				gp[i] *= 1 - h*h
			}
		}
	}
	return a
}

// Flops is the network's floating-point operations per forward pass (a multiply-add
// counts two; a tanh one).
func (m *MLP) Flops() int {
	f := 0
	for l := 1; l < len(m.Sizes); l++ {
		f += 2*m.Sizes[l]*m.Sizes[l-1] + 2*m.Sizes[l]
	}
	return f
}

// mlpFile is the JSON form of an MLP.
type mlpFile struct {
	Format string         `json:"format"`
	Inputs []string       `json:"inputs"`
	Sizes  []int          `json:"sizes"`
	Theta  []float64      `json:"theta"`
	Meta   map[string]any `json:"meta,omitempty"`
}

// MarshalMLP encodes m with provenance meta.
func MarshalMLP(m *MLP, meta map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(mlpFile{Format: FormatMLP, Inputs: NetInputs[:], Sizes: m.Sizes, Theta: m.Theta, Meta: meta}, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseMLP decodes a policy network file, checking its shape and values.
func ParseMLP(b []byte) (*MLP, map[string]any, error) {
	var f mlpFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("rlcc mlp: %w", err)
	}
	var errs []error
	if f.Format != FormatMLP {
		errs = append(errs, fmt.Errorf("rlcc mlp: format = %q: want %q", f.Format, FormatMLP))
	}
	if strings.Join(f.Inputs, ",") != strings.Join(NetInputs[:], ",") {
		errs = append(errs, fmt.Errorf("rlcc mlp: inputs = %v: want %v", f.Inputs, NetInputs))
	}
	if len(f.Sizes) < 2 || len(f.Sizes) > 6 || f.Sizes[0] != NumNetInputs || f.Sizes[len(f.Sizes)-1] != 1 {
		errs = append(errs, fmt.Errorf("rlcc mlp: sizes = %v: want [%d, hidden..., 1] with at most 4 hidden layers", f.Sizes, NumNetInputs))
	} else {
		n := 0
		for l := 1; l < len(f.Sizes); l++ {
			if f.Sizes[l] < 1 || f.Sizes[l] > 256 {
				errs = append(errs, fmt.Errorf("rlcc mlp: sizes[%d] = %d: must be in 1..256", l, f.Sizes[l]))
			}
			n += f.Sizes[l]*f.Sizes[l-1] + f.Sizes[l]
		}
		if len(f.Theta) != n {
			errs = append(errs, fmt.Errorf("rlcc mlp: %d parameters: sizes %v need %d", len(f.Theta), f.Sizes, n))
		}
	}
	for i, v := range f.Theta {
		if !finite(v) {
			errs = append(errs, fmt.Errorf("rlcc mlp: theta[%d] is not finite", i))
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	m := &MLP{Sizes: f.Sizes, Theta: f.Theta}
	m.init()
	return m, f.Meta, nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
