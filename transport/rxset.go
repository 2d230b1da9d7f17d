package transport

// rxSet is a connection's open (incoming, undelivered) messages by ID: one in a field of
// its own, the others in a map, so that a connection receiving one message at a time,
// as most do, neither hashes nor touches the map (an insert and a delete cost about 400
// instructions a message, more than the rest of a small message's bookkeeping).
type rxSet struct {
	one  *rxMsg
	more map[uint32]*rxMsg // made at the first second message; nil until then
}

// get returns the open message id, nil if there is none.
func (s *rxSet) get(id uint32) *rxMsg {
	if s.one != nil && s.one.id == id {
		return s.one
	}
	return s.more[id]
}

// put adds r, which is not in s, under r.id.
func (s *rxSet) put(r *rxMsg) {
	if s.one == nil {
		s.one = r
		return
	}
	if s.more == nil {
		s.more = make(map[uint32]*rxMsg)
	}
	s.more[r.id] = r
}

// del removes message id from s.
func (s *rxSet) del(id uint32) {
	if s.one != nil && s.one.id == id {
		s.one = nil
		return
	}
	delete(s.more, id)
}

// len returns the number of open messages.
func (s *rxSet) len() int {
	n := len(s.more)
	if s.one != nil {
		n++
	}
	return n
}

// empty reports whether there is no open message.
func (s *rxSet) empty() bool { return s.one == nil && len(s.more) == 0 }

// all yields every open message, in no particular order (s may be changed meanwhile).
func (s *rxSet) all(yield func(*rxMsg) bool) {
	if one := s.one; one != nil && !yield(one) {
		return
	}
	for _, r := range s.more {
		if !yield(r) {
			return
		}
	}
}

// shrink rebuilds the map once it holds under a quarter of peak, its high-water mark,
// and returns the new mark: a map never gives back the memory of entries deleted, and an
// open message is charged for its entry only while it is open (mapEntryBytes).
func (s *rxSet) shrink(peak int) int {
	if peak <= mapShrinkMin || 4*s.len() >= peak {
		return peak
	}
	m := make(map[uint32]*rxMsg, len(s.more))
	for id, r := range s.more {
		m[id] = r
	}
	s.more = m
	return s.len()
}
