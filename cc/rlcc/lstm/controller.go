package lstm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/smartt-transport/smartt/cc"
	"github.com/smartt-transport/smartt/cc/rlcc"
	"github.com/smartt-transport/smartt/cc/rlcc/rlccnet"
	"github.com/smartt-transport/smartt/config"
)

// FormatLSTM is the "format" value of an LSTM policy file.
const FormatLSTM = "smartt-rlcc-lstm/1"

type lstmFile struct {
	Format string         `json:"format"`
	Layers []int          `json:"layers"`
	Theta  []float64      `json:"theta"`
	Meta   map[string]any `json:"meta,omitempty"`
}

var fileLayers = []int{LSTMIn, LSTMFC1, LSTMFC2, LSTMHid, 1}

// Marshal encodes m with provenance meta.
func Marshal(m *LSTM, meta map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(lstmFile{Format: FormatLSTM, Layers: fileLayers, Theta: m.Theta[:], Meta: meta}, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Parse decodes an LSTM policy file, checking its format, shape and values.
func Parse(b []byte) (*LSTM, map[string]any, error) {
	var f lstmFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("rlcc lstm: %w", err)
	}
	var errs []error
	if f.Format != FormatLSTM {
		errs = append(errs, fmt.Errorf("rlcc lstm: format = %q: want %q", f.Format, FormatLSTM))
	}
	if fmt.Sprint(f.Layers) != fmt.Sprint(fileLayers) {
		errs = append(errs, fmt.Errorf("rlcc lstm: layers = %v: want %v", f.Layers, fileLayers))
	}
	if len(f.Theta) != LSTMParams {
		errs = append(errs, fmt.Errorf("rlcc lstm: %d parameters: want %d", len(f.Theta), LSTMParams))
	}
	for i, v := range f.Theta {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("rlcc lstm: theta[%d] is not finite", i))
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	m := &LSTM{}
	copy(m.Theta[:], f.Theta)
	return m, f.Meta, nil
}

// Decision is what a Controller saw and did in one decision (training and distillation
// record it).
type Decision struct {
	X     [rlcc.NumFeatures]float64 // the tree controller's features for this observation
	U     float64                   // network output (tanh units)
	Delta float64                   // delta_t
	Now   int64                     // ns
	// Start is the recurrent state before Win[0]; Win[:N] are the last N inputs, this
	// decision's last: the window truncated backpropagation runs over.
	Start LSTMState
	Win   [MaxBPTT][LSTMIn]float64
	N     int
}

// Params is what all Controllers of one configuration share.
type Params struct {
	Net *LSTM
	// BPTT is the window Decision carries (1..MaxBPTT; 0: 1).
	BPTT int
	// OnDecision, if set, is called after every decision.
	OnDecision func(c *Controller, d *Decision)
	cfg        rlcc.Config
	brtt       float64
	maxRTT     int64
	line       float64
	bdpWin     float64
	mtu        int
}

// NewParams compiles cfg for a network with the LSTM policy m.
func NewParams(cfg rlcc.Config, net config.Network, m *LSTM) (*Params, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := net.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("rlcc lstm: no network")
	}
	line := float64(net.LinkRate) / 8
	return &Params{Net: m, cfg: cfg, brtt: float64(net.BaseRTT), maxRTT: 64 * net.BaseRTT, line: line,
		bdpWin: min(line*float64(net.BaseRTT)*cfg.WindowRTTs/1e9, 1<<30), mtu: net.MTU}, nil
}

// Controller is RL-CC driven by the LSTM in float64, for the simulator and training: the
// tree controller's decision rule (once per RTT sample of a packet sent after the
// previous decision; a loss is an RTT of 64 base RTTs), input (rtt_reward, a_{t-1}), the
// action applied as rlccnet.Multiplier, clamped.
type Controller struct {
	p      *Params
	last   int64
	rtt    int64
	rate   float64
	d1     float64
	u1     float64 // previous action, tanh units
	a1, a2 float64 // previous multipliers
	st     LSTMState
	hist   [MaxBPTT]LSTMState // state before each of the last inputs (ring)
	ins    [MaxBPTT][LSTMIn]float64
	n      int
	pace   int64
	window int
	d      Decision
	// Flow identifies the controller to OnDecision (set by the caller).
	Flow int
}

// NewController returns a controller at the initial rate with a zero recurrent state.
func NewController(p *Params) *Controller {
	c := &Controller{p: p, rate: p.cfg.InitialRate, a1: 1, a2: 1}
	c.setRate()
	return c
}

// OnAck decides once per RTT sample of a packet sent after the previous decision.
func (c *Controller) OnAck(a cc.Ack) {
	if a.RTT <= 0 || a.Now-a.RTT < c.last {
		return
	}
	c.last, c.rtt = a.Now, a.RTT
	c.decide(a.RTT)
}

// OnLoss decides as on an RTT of 64 base RTTs, gated like OnAck by the latest sample.
func (c *Controller) OnLoss(l cc.Loss) {
	if l.Now-c.rtt < c.last {
		return
	}
	c.last = l.Now
	c.decide(c.p.maxRTT)
}

func (c *Controller) decide(rtt int64) {
	p := c.p
	infl := float64(min(rtt, p.maxRTT)) / p.brtt
	delta := p.cfg.Target - max(infl-p.cfg.Beta, 0)*math.Sqrt(c.rate)
	in := [LSTMIn]float64{rlccnet.RTTReward(delta), c.u1}
	k := min(max(p.BPTT, 1), MaxBPTT)
	slot := c.n % k
	c.hist[slot], c.ins[slot] = c.st, in
	u := p.Net.Forward(in[0], in[1], &c.st)
	m := min(max(rlccnet.Multiplier(u), p.cfg.MinAction), p.cfg.MaxAction)
	d := &c.d
	d.X = [rlcc.NumFeatures]float64{rlcc.FeatDelta: delta, rlcc.FeatDeltaPrev: c.d1, rlcc.FeatActionPrev: c.a1, rlcc.FeatActionPrev2: c.a2, rlcc.FeatRate: c.rate}
	d.U, d.Delta, d.Now = u, delta, c.last
	c.n++
	if p.OnDecision != nil {
		d.N = min(c.n, k)
		first := (c.n - d.N) % k
		d.Start = c.hist[first]
		for i := range d.N {
			d.Win[i] = c.ins[(first+i)%k]
		}
	}
	c.rate = min(max(c.rate*m, p.cfg.MinRate), 1)
	c.d1, c.a2, c.a1, c.u1 = delta, c.a1, m, rlccnet.ActionUnits(m)
	c.setRate()
	if p.OnDecision != nil {
		p.OnDecision(c, d)
	}
}

func (c *Controller) setRate() {
	c.pace = max(int64(c.rate*c.p.line), 1)
	c.window = max(int(c.rate*c.p.bdpWin), c.p.mtu)
}

// Window returns the in-flight cap: rate * base RTT * WindowRTTs, at least one MTU.
func (c *Controller) Window() int { return c.window }

// PacingRate returns the rate in bytes/s.
func (c *Controller) PacingRate() int64 { return c.pace }

// Rate returns the rate as a fraction of line rate.
func (c *Controller) Rate() float64 { return c.rate }
