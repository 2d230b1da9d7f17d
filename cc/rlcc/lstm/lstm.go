// Package lstm is the RL-CC paper's original teacher network (FC 32-16, LSTM 16, FC 1)
// in float64: inference, its truncated backpropagation through time and a controller for
// the simulator (training, distillation and Table I in cc/rlcc/train). The engine and the
// daemon never link it.
package lstm

import (
	"math"
	"math/rand/v2"

	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
	"github.com/smartt-transport/smartt/config"
)

// The original RL-CC architecture (Fuhrer et al., Sec. III, "NN Architecture"): input
// (delta_t, a_{t-1}) -> FC 32 -> FC 16 -> LSTM 16 -> FC 1. Its weights number 2,753, as
// the paper says (Sec. V-A), with one bias per LSTM gate.
const (
	LSTMIn  = 2  // delta_t, a_{t-1}
	LSTMFC1 = 32 // first fully connected layer
	LSTMFC2 = 16 // second fully connected layer
	LSTMHid = 16 // LSTM hidden and cell width
)

// LSTM weight layout in Theta (each matrix row-major, rows = outputs): FC1 weights and
// biases, FC2 weights and biases, the LSTM's input weights (4*Hid x FC2, gate order
// i, f, g, o), its recurrent weights (4*Hid x Hid), its gate biases, the output layer's
// weights and bias.
const (
	lstmW1   = 0
	lstmB1   = lstmW1 + LSTMFC1*LSTMIn
	lstmW2   = lstmB1 + LSTMFC1
	lstmB2   = lstmW2 + LSTMFC2*LSTMFC1
	lstmWx   = lstmB2 + LSTMFC2
	lstmWh   = lstmWx + 4*LSTMHid*LSTMFC2
	lstmBg   = lstmWh + 4*LSTMHid*LSTMHid
	lstmWo   = lstmBg + 4*LSTMHid
	lstmBo   = lstmWo + LSTMHid
	lstmSize = lstmBo + 1

	// LSTMParams is the number of weights and biases: 2,753.
	LSTMParams = lstmSize
)

// LSTMState is one flow's recurrent state, the 32 per-flow values the paper says the
// architecture keeps (hidden and cell).
type LSTMState struct{ H, C [LSTMHid]float64 }

// LSTM is the paper's original teacher network in float64, for Table I: its operation
// count and its inference time beside the distilled trees'. Tanh after each fully
// connected layer (the paper does not name its activations; the deployed MLP's are tanh),
// sigmoid gates. Forward keeps its activations in fixed arrays: no allocation, one
// goroutine at a time.
type LSTM struct {
	Theta [lstmSize]float64
	x1    [LSTMFC1]float64
	x2    [LSTMFC2]float64
	z     [4 * LSTMHid]float64
}

// NewLSTM returns the network with Glorot-uniform weights from a seeded generator (zero
// biases, the forget gate's at 1, the usual LSTM start). It is not trained: the
// repository's training loop differentiates one step, not through time (docs/rlcc.md).
func NewLSTM(seed uint64) *LSTM {
	m := &LSTM{}
	rng := rand.New(rand.NewPCG(seed, 0x157a))
	fill := func(off, in, out int) {
		lim := math.Sqrt(6 / float64(in+out))
		for i := range in * out {
			m.Theta[off+i] = lim * (2*rng.Float64() - 1)
		}
	}
	fill(lstmW1, LSTMIn, LSTMFC1)
	fill(lstmW2, LSTMFC1, LSTMFC2)
	fill(lstmWx, LSTMFC2, 4*LSTMHid)
	fill(lstmWh, LSTMHid, 4*LSTMHid)
	fill(lstmWo, LSTMHid, 1)
	for j := range LSTMHid {
		m.Theta[lstmBg+LSTMHid+j] = 1
	}
	return m
}

// ScaleOutput multiplies the output layer's weights by f: training starts from a tenth
// (as the MLP's), so the untrained policy keeps the rate instead of saturating.
func (m *LSTM) ScaleOutput(f float64) {
	for j := range LSTMHid {
		m.Theta[lstmWo+j] *= f
	}
}

func sigmoid(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

// dense sets y = w x + b (w row-major, len(y) rows of len(x)).
func dense(y []float64, w, b, x []float64) {
	n := len(x)
	for r := range y {
		row := w[r*n : (r+1)*n]
		s := b[r]
		for c, v := range x {
			s += row[c] * v
		}
		y[r] = s
	}
}

// Forward advances the flow's state st by one step with input (delta, aPrev) (the
// controller feeds delta as rlccnet.RTTReward(delta), -12.5 delta clamped, and aPrev in
// tanh units) and returns the action in tanh units (multiplier rlccnet.Multiplier(u)). No allocation.
func (m *LSTM) Forward(delta, aPrev float64, st *LSTMState) float64 {
	th := m.Theta[:]
	in := [LSTMIn]float64{delta, aPrev}
	dense(m.x1[:], th[lstmW1:lstmB1], th[lstmB1:lstmW2], in[:])
	for i, v := range m.x1 {
		m.x1[i] = math.Tanh(v)
	}
	dense(m.x2[:], th[lstmW2:lstmB2], th[lstmB2:lstmWx], m.x1[:])
	for i, v := range m.x2 {
		m.x2[i] = math.Tanh(v)
	}
	dense(m.z[:], th[lstmWx:lstmWh], th[lstmBg:lstmWo], m.x2[:])
	wh := th[lstmWh:lstmBg]
	for r := range m.z {
		row := wh[r*LSTMHid : (r+1)*LSTMHid]
		s := m.z[r]
		for c, v := range st.H {
			s += row[c] * v
		}
		m.z[r] = s
	}
	out := th[lstmBo]
	for j := range LSTMHid {
		i, f := sigmoid(m.z[j]), sigmoid(m.z[LSTMHid+j])
		g, o := math.Tanh(m.z[2*LSTMHid+j]), sigmoid(m.z[3*LSTMHid+j])
		st.C[j] = f*st.C[j] + i*g
		st.H[j] = o * math.Tanh(st.C[j])
		out += th[lstmWo+j] * st.H[j]
	}
	return math.Tanh(out)
}

// LSTMOps counts one forward pass: MACs are multiply-adds of the weight matrices (the
// unit of the paper's Table I: its 2,600 for the LSTM and 200 for the MLP match this
// count of ours, 2,640 and 204), Adds the bias additions, Elementwise the LSTM's cell
// and hidden updates (multiplies and adds), Activations the tanh and sigmoid calls.
type LSTMOps struct{ MACs, Adds, Elementwise, Activations int }

// Flops counts a multiply-add as two floating-point operations, everything else as one.
func (o LSTMOps) Flops() int { return 2*o.MACs + o.Adds + o.Elementwise + o.Activations }

// LSTMCount is the analytic operation count of Forward, from the layer widths.
func LSTMCount() LSTMOps {
	return LSTMOps{
		MACs:        LSTMFC1*LSTMIn + LSTMFC2*LSTMFC1 + 4*LSTMHid*(LSTMFC2+LSTMHid) + LSTMHid,
		Adds:        LSTMFC1 + LSTMFC2 + 4*LSTMHid + 1,
		Elementwise: 4 * LSTMHid, // c = f*c + i*g (3), h = o*tanh(c) (1)
		Activations: LSTMFC1 + LSTMFC2 + 5*LSTMHid + 1,
	}
}

// MLPMACs is an MLP's multiply-adds per forward pass (the unit of the paper's Table I).
func MLPMACs(m *rlccnet.MLP) int {
	n := 0
	for l := 1; l < len(m.Sizes); l++ {
		n += m.Sizes[l] * m.Sizes[l-1]
	}
	return n
}

// LSTMFlow is one flow driven by the LSTM teacher, deciding as the tree controller's
// Decide does (the observation delta from an RTT sample, the action clamped, the rate
// multiplied): Table I times this against the trees' Decide and the MLP's.
type LSTMFlow struct {
	Net  *LSTM
	St   LSTMState
	Rate float64 // fraction of line rate
	a1   float64 // previous action, tanh units
	cfg  rlcc.Config
	brtt float64
	max  int64
}

// NewLSTMFlow returns a flow at cfg's initial rate on network net.
func NewLSTMFlow(m *LSTM, cfg rlcc.Config, net config.Network) *LSTMFlow {
	return &LSTMFlow{Net: m, Rate: cfg.InitialRate, cfg: cfg, brtt: float64(net.BaseRTT), max: 64 * net.BaseRTT}
}

// Decide makes one decision on an RTT sample (ns). No allocation.
func (f *LSTMFlow) Decide(rtt int64) {
	infl := float64(min(rtt, f.max)) / f.brtt
	delta := f.cfg.Target - max(infl-f.cfg.Beta, 0)*math.Sqrt(f.Rate)
	u := f.Net.Forward(rlccnet.RTTReward(delta), f.a1, &f.St)
	a := min(max(rlccnet.Multiplier(u), f.cfg.MinAction), f.cfg.MaxAction)
	f.Rate = min(max(f.Rate*a, f.cfg.MinRate), 1)
	f.a1 = u
}
