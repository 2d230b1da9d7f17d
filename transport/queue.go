package transport

// ring is a growable FIFO. It allocates only when it must grow, so a queue that reaches
// its working size stops allocating.
type ring[T any] struct {
	buf        []T
	head, size int
}

func (r *ring[T]) len() int { return r.size }

func (r *ring[T]) push(v T) {
	if r.size == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.size)&(len(r.buf)-1)] = v
	r.size++
}

// next pushes a zero element and returns a pointer to it, valid until the ring changes:
// a large element is filled in place, not built and then copied in (slots are zero
// until pushed: pop and reset clear them, grow makes new ones).
func (r *ring[T]) next() *T {
	if r.size == len(r.buf) {
		r.grow()
	}
	p := &r.buf[(r.head+r.size)&(len(r.buf)-1)]
	r.size++
	return p
}

func (r *ring[T]) grow() {
	n := 2 * len(r.buf)
	if n == 0 {
		n = 16
	}
	nb := make([]T, n)
	for i := 0; i < r.size; i++ {
		nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf, r.head = nb, 0
}

// peek returns a pointer to the oldest element; the ring must not be empty.
func (r *ring[T]) peek() *T { return &r.buf[r.head] }

func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.size--
	return v
}

func (r *ring[T]) reset() {
	clear(r.buf)
	r.head, r.size = 0, 0
}
