package transport

// The endpoint keeps its connections in a binary min-heap by next deadline (conn.dl), so
// NextTimeout is O(1) and HandleTimeout visits only the connections whose deadline has
// passed: with thousands of connections (an incast receiver, a simulated host) scanning
// them all on every packet dominated the cost.

// heapPush adds c to the timer heap.
func (e *Endpoint) heapPush(c *conn) {
	c.hidx = int32(len(e.theap))
	e.theap = append(e.theap, c)
	e.heapUp(int(c.hidx))
}

// heapRemove takes c out of the timer heap.
func (e *Endpoint) heapRemove(c *conn) {
	i := int(c.hidx)
	if i < 0 {
		return
	}
	last := len(e.theap) - 1
	if i != last {
		e.heapSwap(i, last)
	}
	e.theap[last] = nil
	e.theap = e.theap[:last]
	c.hidx = -1
	if i != last {
		e.heapFixAt(i)
	}
}

// heapFixAt restores the heap after the deadline of its element i changed (touch).
func (e *Endpoint) heapFixAt(i int) {
	if !e.heapUp(i) {
		e.heapDown(i)
	}
}

func (e *Endpoint) heapSwap(i, j int) {
	h := e.theap
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = int32(i), int32(j)
}

// heapUp moves element i up; it reports whether it moved.
func (e *Endpoint) heapUp(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if e.theap[p].dl <= e.theap[i].dl {
			break
		}
		e.heapSwap(i, p)
		i = p
		moved = true
	}
	return moved
}

func (e *Endpoint) heapDown(i int) {
	h := e.theap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].dl < h[l].dl {
			m = r
		}
		if h[i].dl <= h[m].dl {
			return
		}
		e.heapSwap(i, m)
		i = m
	}
}

// expired appends to dst every connection whose deadline is at or before now, visiting
// only those (and their children in the heap).
func (e *Endpoint) expired(dst []*conn, now int64) []*conn {
	stack := e.hstack[:0]
	if len(e.theap) > 0 {
		stack = append(stack, 0)
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if e.theap[i].dl > now {
			continue
		}
		dst = append(dst, e.theap[i])
		for _, k := range [2]int32{2*i + 1, 2*i + 2} {
			if int(k) < len(e.theap) {
				stack = append(stack, k)
			}
		}
	}
	e.hstack = stack
	return dst
}
