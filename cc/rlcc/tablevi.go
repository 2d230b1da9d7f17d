package rlcc

// TableVIStates are the three system conditions of the paper's Table VI as delta/target:
// under-utilised (RTT inflation <= beta: delta = target), on target (delta = 0, the
// reward's optimum) and congested (delta = -target).
var TableVIStates = [3]float64{1, 0, -1}

// ActionTable evaluates a policy, given as a function of the observation features, at
// Table VI's nine (previous, current) conditions. The history is the policy's own: the
// previous decision saw the previous condition after a steady history (actions 1, delta
// equal to it), and its action is a_{t-1}; a_{t-2} = 1.
func ActionTable(pol func(x *[NumFeatures]float64) float64, target float64) [3][3]float64 {
	var t [3][3]float64
	for i, zp := range TableVIStates {
		prev := [NumFeatures]float64{FeatDelta: zp * target, FeatDeltaPrev: zp * target,
			FeatActionPrev: 1, FeatActionPrev2: 1}
		ap := pol(&prev)
		for j, zc := range TableVIStates {
			x := [NumFeatures]float64{FeatDelta: zc * target, FeatDeltaPrev: zp * target,
				FeatActionPrev: ap, FeatActionPrev2: 1}
			t[i][j] = pol(&x)
		}
	}
	return t
}

// ColumnOrder reports whether t has Table VI's ordering down every column: the paper's
// column "under-utilised" increases from row to row (1.05 < 1.10 < 1.15), "on target"
// and "congested" too (0.92 < 1.00 < 1.07, 0.89 < 0.90 < 0.94).
func ColumnOrder(t [3][3]float64) [3]bool { return ColumnOrderWithin(t, 0) }

// DistillTol is the fit error of distilled trees against the network they were distilled
// from (the default trees' held-out RMSE, 0.033, rounded): they cannot be asked to order
// actions more finely than that.
const DistillTol = 0.03

// ColumnOrderWithin is ColumnOrder for an approximation with fit error tol: every column
// rises from its first row to its last, and no step falls by tol or more.
func ColumnOrderWithin(t [3][3]float64, tol float64) [3]bool {
	var ok [3]bool
	for j := range 3 {
		d1, d2 := t[1][j]-t[0][j], t[2][j]-t[1][j]
		ok[j] = t[2][j] > t[0][j] && d1 > -tol && d2 > -tol && (tol > 0 || (d1 > 0 && d2 > 0))
	}
	return ok
}
