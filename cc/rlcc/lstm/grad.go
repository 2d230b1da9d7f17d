package lstm

import "math"

// MaxBPTT is the longest window AccumGrad backpropagates through.
const MaxBPTT = 16

// bpttStep is one step's activations, kept for the backward pass.
type bpttStep struct {
	in     [LSTMIn]float64
	x1     [LSTMFC1]float64
	x2     [LSTMFC2]float64
	i, f   [LSTMHid]float64
	g, o   [LSTMHid]float64
	c, tc  [LSTMHid]float64 // cell and tanh(cell)
	h      [LSTMHid]float64
	cp, hp [LSTMHid]float64 // the state before the step
}

// Grad is the scratch of AccumGrad (about 40 KiB): one per trainer, reused.
type Grad struct{ steps [MaxBPTT]bpttStep }

// forwardStep runs one step from state (hp, cp) on input in, filling s.
func (m *LSTM) forwardStep(s *bpttStep, in [LSTMIn]float64, hp, cp *[LSTMHid]float64) {
	th := m.Theta[:]
	s.in, s.hp, s.cp = in, *hp, *cp
	dense(s.x1[:], th[lstmW1:lstmB1], th[lstmB1:lstmW2], s.in[:])
	for i, v := range s.x1 {
		s.x1[i] = math.Tanh(v)
	}
	dense(s.x2[:], th[lstmW2:lstmB2], th[lstmB2:lstmWx], s.x1[:])
	for i, v := range s.x2 {
		s.x2[i] = math.Tanh(v)
	}
	var z [4 * LSTMHid]float64
	dense(z[:], th[lstmWx:lstmWh], th[lstmBg:lstmWo], s.x2[:])
	wh := th[lstmWh:lstmBg]
	for r := range z {
		row := wh[r*LSTMHid : (r+1)*LSTMHid]
		v := z[r]
		for c, h := range s.hp {
			v += row[c] * h
		}
		z[r] = v
	}
	for j := range LSTMHid {
		s.i[j], s.f[j] = sigmoid(z[j]), sigmoid(z[LSTMHid+j])
		s.g[j], s.o[j] = math.Tanh(z[2*LSTMHid+j]), sigmoid(z[3*LSTMHid+j])
		s.c[j] = s.f[j]*s.cp[j] + s.i[j]*s.g[j]
		s.tc[j] = math.Tanh(s.c[j])
		s.h[j] = s.o[j] * s.tc[j]
	}
}

// AccumGrad runs the network from state st over the inputs in (oldest first; at most
// MaxBPTT) and adds scale * d(output at the last step)/d(Theta) to g: truncated
// backpropagation through time over len(in) steps (the state before the window, and the
// inputs, are constants). Returns the last output, equal to what Forward gives on the
// same sequence. No allocation.
func (m *LSTM) AccumGrad(sc *Grad, st *LSTMState, in [][LSTMIn]float64, scale float64, g []float64) float64 {
	k := len(in)
	if k < 1 || k > MaxBPTT || len(g) != lstmSize {
		panic("lstm: AccumGrad: bad window or gradient length")
	}
	hp, cp := &st.H, &st.C
	for t := range k {
		m.forwardStep(&sc.steps[t], in[t], hp, cp)
		hp, cp = &sc.steps[t].h, &sc.steps[t].c
	}
	th := m.Theta[:]
	last := &sc.steps[k-1]
	out := th[lstmBo]
	for j, h := range last.h {
		out += th[lstmWo+j] * h
	}
	y := math.Tanh(out)
	dy := scale * (1 - y*y)
	var dh, dc [LSTMHid]float64
	for j, h := range last.h {
		g[lstmWo+j] += dy * h
		dh[j] = dy * th[lstmWo+j]
	}
	g[lstmBo] += dy
	for t := k - 1; t >= 0; t-- {
		m.backStep(&sc.steps[t], &dh, &dc, g)
	}
	return y
}

// backStep backpropagates one step: dh, dc are the gradients of the step's hidden and
// cell outputs on entry and of the state before it on return.
func (m *LSTM) backStep(s *bpttStep, dh, dc *[LSTMHid]float64, g []float64) {
	th := m.Theta[:]
	var dz [4 * LSTMHid]float64
	for j := range LSTMHid {
		do := dh[j] * s.tc[j]
		c := dc[j] + dh[j]*s.o[j]*(1-s.tc[j]*s.tc[j])
		dz[j] = c * s.g[j] * s.i[j] * (1 - s.i[j])
		dz[LSTMHid+j] = c * s.cp[j] * s.f[j] * (1 - s.f[j])
		dz[2*LSTMHid+j] = c * s.i[j] * (1 - s.g[j]*s.g[j])
		dz[3*LSTMHid+j] = do * s.o[j] * (1 - s.o[j])
		dc[j] = c * s.f[j]
	}
	var dx2 [LSTMFC2]float64
	*dh = [LSTMHid]float64{}
	for r, d := range dz {
		g[lstmBg+r] += d
		wx := th[lstmWx+r*LSTMFC2 : lstmWx+(r+1)*LSTMFC2]
		gx := g[lstmWx+r*LSTMFC2 : lstmWx+(r+1)*LSTMFC2]
		for c, x := range s.x2 {
			gx[c] += d * x
			dx2[c] += d * wx[c]
		}
		wh := th[lstmWh+r*LSTMHid : lstmWh+(r+1)*LSTMHid]
		gh := g[lstmWh+r*LSTMHid : lstmWh+(r+1)*LSTMHid]
		for c, h := range s.hp {
			gh[c] += d * h
			dh[c] += d * wh[c]
		}
	}
	var dx1 [LSTMFC1]float64
	for r := range LSTMFC2 {
		d := dx2[r] * (1 - s.x2[r]*s.x2[r])
		g[lstmB2+r] += d
		w := th[lstmW2+r*LSTMFC1 : lstmW2+(r+1)*LSTMFC1]
		gw := g[lstmW2+r*LSTMFC1 : lstmW2+(r+1)*LSTMFC1]
		for c, x := range s.x1 {
			gw[c] += d * x
			dx1[c] += d * w[c]
		}
	}
	for r := range LSTMFC1 {
		d := dx1[r] * (1 - s.x1[r]*s.x1[r])
		g[lstmB1+r] += d
		for c, x := range s.in {
			g[lstmW1+r*LSTMIn+c] += d * x
		}
	}
}
