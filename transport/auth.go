package transport

// Packet authentication (issue 13): the engine's side of transport/seal. Everything the
// engine does for it is here; endpoint.go calls in at four places (NewEndpoint, Dial,
// HandlePacket before decoding, PollTransmit after encoding). docs/security.md has the
// threat model.

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/smartt-transport/smartt/transport/seal"
	"github.com/smartt-transport/smartt/transport/wire"
)

// AuthStats counts packet authentication (Stats.Auth). All zero when it is off.
type AuthStats struct {
	// Failed: sealed packets that did not authenticate (bad session check or tag, no key
	// for the source, a session's packet from another address, a malformed trailer).
	Failed uint64
	// Replayed: packets whose counter was already accepted or is older than the replay
	// window (seal.ReplayWindow) of their session.
	Replayed uint64
	// Unsealed: packets without a seal (or too short to carry one).
	Unsealed uint64
	// Stale: packets of sessions older than MaxAge, begun more than max_skew in the
	// future, or begun before this endpoint started (less max_skew).
	Stale uint64
	// Refused: authentic first packets of new sessions refused because max_sessions
	// receiving sessions are held.
	Refused uint64
	// TrimHints: trimmed DATA (its seal cut off) used as a hint: a NACK for a PSN not
	// yet received on a connection proven by authenticated packets.
	TrimHints uint64
	// TrimIgnored: trimmed DATA that named no such connection or PSN.
	TrimIgnored uint64
	// NoKey: datagrams not sent because no key covers their destination.
	NoKey uint64
	// Sessions is a gauge: receiving sessions held.
	Sessions uint64
	// Rekeys: sending sessions started.
	Rekeys uint64
}

// authEngine is an endpoint's packet authentication.
type authEngine struct {
	s       *seal.Sealer
	scratch []byte // Encrypt mode: the decrypted packet (HandlePacket's b is read-only)
}

// MaxDatagram is the largest datagram an endpoint with cfg sends or accepts: the buffer
// PollTransmit needs and drivers should read into. It is MTU + wire.DataHdrLen (+ the INT
// block with INT on; at least
// wire.MaxAckLen), plus seal.Overhead when authentication is on.
func MaxDatagram(cfg Config) int {
	n := max(cfg.MTU+wire.DataHdrLen+cfg.intLen(), wire.MaxAckLen)
	if cfg.Auth.Enabled() {
		n += seal.Overhead
	}
	return n
}

// authErrors validates cfg.Auth and the MTU that the seal's trailer leaves.
func (c *Config) authErrors() error {
	if err := c.Auth.Validate(); err != nil {
		return err
	}
	if c.Auth.Enabled() && c.MTU+seal.Overhead > MaxMTU {
		return fmt.Errorf("mtu = %d: must be in 64..%d bytes with auth.mode = %v (the %d-byte seal must fit the datagram)",
			c.MTU, MaxMTU-seal.Overhead, c.Auth.Mode, seal.Overhead)
	}
	return nil
}

// newAuth builds the sealer for cfg (nil when authentication is off). Session IDs take
// their randomness from crypto/rand, not the endpoint's seeded source: two hosts given
// one seed must still never pick the same session ID under a shared key.
func newAuth(cfg *Config) (*authEngine, error) {
	if !cfg.Auth.Enabled() {
		return nil, nil
	}
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("auth: random seed: %w", err)
	}
	s, err := seal.New(cfg.Auth, seed)
	if err != nil {
		return nil, err
	}
	a := &authEngine{s: s}
	if cfg.Auth.Mode == seal.Encrypt {
		a.scratch = make([]byte, MaxDatagram(*cfg))
	}
	return a, nil
}

// authDial checks that a key covers peer and starts a new sending session to it unless
// the current one began this second (a restarted peer refuses older sessions).
func (e *Endpoint) authDial(now int64, peer netip.AddrPort) error {
	if e.auth == nil {
		return nil
	}
	if err := e.auth.s.Connect(now, peer.Addr()); err != nil {
		e.stats.Auth.NoKey++
		return fmt.Errorf("transport: dial %v: %w", peer, err)
	}
	return nil
}

// openIn checks the seal of a received datagram. It returns the packet to decode, without
// its trailer (in Encrypt mode decrypted into the endpoint's scratch buffer; b is never
// written), or nil when the datagram is dropped (counted in Stats.Auth) or was a trimmed
// DATA packet taken as a hint.
func (e *Endpoint) openIn(now int64, b []byte, m *RxMeta) []byte {
	a := e.auth
	if a == nil {
		return b
	}
	st := &e.stats.Auth
	if len(b) < wire.CommonLen+seal.Overhead || wire.Flags(b[1])&wire.FlagSealed == 0 {
		st.Unsealed++
		return nil
	}
	hdr := len(b) // Encrypt mode encrypts nothing of control packets
	if wire.Type(b[0]&0x0f) == wire.TypeData {
		if len(b) < wire.DataHdrLen {
			st.Failed++
			return nil
		}
		// A switch that trims a packet cuts its seal off: the header may still tell the
		// receiver to NACK, nothing more.
		full := wire.DataHdrLen + int(binary.BigEndian.Uint16(b[44:])) + seal.Overhead
		if len(b) < full || wire.Flags(b[1])&wire.FlagTrimmed != 0 {
			e.trimHint(now, b[:wire.DataHdrLen], m)
			return nil
		}
		hdr = wire.DataHdrLen
	}
	body, res := a.s.Open(now, m.From.Addr(), b, hdr, a.scratch)
	switch res {
	case seal.OK:
		return body
	case seal.NewSession:
		st.Sessions = uint64(a.s.Sessions())
		return body
	case seal.Replayed:
		st.Replayed++
	case seal.Stale:
		st.Stale++
	case seal.Full:
		st.Refused++
	default:
		st.Failed++
	}
	st.Sessions = uint64(a.s.Sessions())
	return nil
}

// trimHint handles the 64-byte header h of a trimmed sealed DATA packet. It cannot be
// authenticated, so it may only do what a NACK costs: ask the peer of a connection proven
// by authenticated packets to resend a PSN we have not received. It never creates a
// connection, learns a peer ID or moves any receive state (AckFloor is ignored).
func (e *Endpoint) trimHint(now int64, h []byte, m *RxMeta) {
	st := &e.stats.Auth
	p := &e.pkt
	if p.Decode(h) != nil || p.Type != wire.TypeData || p.Flags&wire.FlagEC != 0 {
		st.TrimIgnored++ // (a trimmed parity packet asks for nothing: parity is never resent)
		return
	}
	reply := m.From
	if p.ReplyPort != 0 {
		reply = netip.AddrPortFrom(m.From.Addr(), p.ReplyPort)
	}
	var c *conn
	if p.DstConn != 0 {
		c = e.conns[p.DstConn]
	} else {
		c = e.byPeer[peerKey{reply, p.SrcConn}]
	}
	psn := p.Data.PSN
	if c == nil || c.dead || c.peer != reply || c.peerID == 0 || c.peerID != p.SrcConn ||
		!c.rxInit || wire.SeqDiff(psn, c.tracker.Cum()) < 0 ||
		int(wire.SeqDiff(psn, c.tracker.Cum())) >= c.tracker.Size() || c.tracker.Has(psn) {
		st.TrimIgnored++
		return
	}
	st.TrimHints++
	e.stats.DataRecv++
	e.stats.Trimmed++
	ce := m.ECN == CE
	if ce {
		e.stats.CERecv++
	}
	rx := m.RxTime
	if rx == 0 || rx > now {
		rx = now
	}
	nk := nackEntry{psn: psn, ev: p.EV, ce: ce, txTime: p.Data.TxTime, rxTime: rx}
	// As in onData, the recovery mode may take the NACK (ec: it waits for the block's
	// parity; gobackn: a go-back NACK for the expected PSN, once).
	if (e.rec == nil || !e.rec.trimNack(c, &p.Data, p.Flags&wire.FlagRetx != 0, nk)) && c.nacks.len() < maxNacks {
		c.nacks.push(nk)
	}
	e.markReady(c)
	e.touch(c, now)
}

// sealOut seals the datagram buf[:n] for to and returns its new length; an encoding error
// err passes through. It fails (counted) only when no key covers to.
func (e *Endpoint) sealOut(now int64, to netip.AddrPort, buf []byte, n int, err error) (int, error) {
	a := e.auth
	if a == nil || err != nil {
		return n, err
	}
	hdr := n
	if wire.Type(buf[0]&0x0f) == wire.TypeData {
		hdr = wire.DataHdrLen
	}
	buf[1] |= byte(wire.FlagSealed)
	m, err := a.s.Seal(now, to.Addr(), buf, n, hdr)
	if err == seal.ErrBuffer {
		panic(fmt.Sprintf("transport: PollTransmit buffer of %d bytes: a sealed datagram needs %d (MaxDatagram)", len(buf), n+seal.Overhead))
	}
	if err != nil {
		e.stats.Auth.NoKey++
		return 0, err
	}
	e.stats.Auth.Rekeys = a.s.Rekeys
	return m, nil
}

// sealTx seals a connection's transmit t (from PollTransmit); false drops it.
func (e *Endpoint) sealTx(now int64, t Transmit, ok bool, buf []byte) (Transmit, bool) {
	if e.auth == nil || !ok {
		return t, ok
	}
	n, err := e.sealOut(now, t.To, buf, t.N, nil)
	t.N = n
	return t, err == nil
}
