package transport

// Unsend takes back message msgID queued on connection id if no byte of it was sent yet
// and it is the connection's newest message (so no later message's ID or stream offset
// depends on it): the connection is as if it had never been queued, and no event will
// be reported for it. It reports whether the message was taken back.
func (e *Endpoint) Unsend(id ConnID, msgID uint32) bool {
	c := e.conns[uint64(id)]
	if c == nil || c.msgs.len() == 0 || msgID != c.nextMsgID-1 {
		return false
	}
	m := c.msgs.buf[(c.msgs.head+c.msgs.len()-1)&(len(c.msgs.buf)-1)]
	if m.id != msgID || m.sent != 0 || m.done {
		return false
	}
	c.msgs.popBack()
	c.cur = min(c.cur, c.msgs.len())
	c.nextMsgID--
	c.streamNext -= streamLen(m.n)
	e.freeMsg(m)
	return true
}

// popBack removes the newest element; the ring must not be empty.
func (r *ring[T]) popBack() T {
	var zero T
	i := (r.head + r.size - 1) & (len(r.buf) - 1)
	v := r.buf[i]
	r.buf[i] = zero
	r.size--
	return v
}
