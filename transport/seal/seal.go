// Package seal authenticates (and optionally encrypts) smartt packets with AES-256-GCM.
//
// A sealed packet carries a 36-byte trailer after its body:
//
//	body | tag (16) | session ID (16) | counter (4)
//
// The session ID is the session's start time in seconds (4 bytes), 8 random bytes and a
// 4-byte check (AES of the first 12 bytes under a key derived from the configured key),
// which lets a receiver refuse a forged session ID with one AES block instead of a key
// derivation. The session key is HKDF-SHA256 of the configured key (per-peer by IP
// prefix, or the fabric-wide one) with info "smartt seal v1" || session ID; the GCM nonce
// is the counter, which starts at 1 and grows by one per packet. The tag covers the body's
// clear part (all of it, or in Encrypt mode the type's fixed header) as additional data
// and the encrypted part as ciphertext; the session ID and counter are bound through the
// key and the nonce. The receiver keeps a replay window per session. docs/security.md has
// the threat model, docs/wire.md the format.
//
// The package is pure: no I/O, no clock reads (every call takes now, ns), no goroutines;
// a Sealer is not safe for concurrent use. Sealing and opening allocate nothing; starting a
// session (sender or receiver) does.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"net/netip"
	"sort"
)

// Trailer layout and limits.
const (
	TagLen       = 16                                 // GCM tag
	SessionIDLen = 16                                 // start time, seconds (4) | random (8) | check (4)
	CounterLen   = 4                                  // per-packet counter, the GCM nonce
	Overhead     = TagLen + SessionIDLen + CounterLen // bytes Seal appends: 36
	// ReplayWindow is how many counters behind the highest one seen a packet may arrive
	// and still be accepted (once): 8,128, about twice the engine's default PSN window,
	// so that reordering by per-packet spraying stays far inside it (docs/security.md).
	ReplayWindow = (replayWords - 1) * 64
	// RekeyPackets is the number of packets after which the sender starts a new session
	// (the counter is 32 bits; this leaves half of it unused).
	RekeyPackets = 1 << 31
)

const (
	label       = "smartt seal v1"
	checkLabel  = "smartt seal v1 session check"
	checkLen    = 4
	replayWords = 128 // ring of 8,192 bits
	candSlots   = 64  // derived keys of session IDs not (yet) admitted
)

// Result is the outcome of Open.
type Result uint8

// Open results. Only OK and NewSession hand a packet on.
const (
	OK         Result = iota // authentic, on a known session
	NewSession               // authentic, first packet of a session now admitted
	Failed                   // no key for the source, bad session check or tag, wrong source for the session, malformed trailer
	Replayed                 // counter already seen or older than the replay window (checked before the tag)
	Stale                    // session older than MaxAge, in the future beyond MaxSkew, or begun before this receiver started (less MaxSkew)
	Full                     // authentic first packet of a new session, refused: MaxSessions are held
)

// String names the result.
func (r Result) String() string {
	switch r {
	case OK:
		return "ok"
	case NewSession:
		return "new_session"
	case Failed:
		return "failed"
	case Replayed:
		return "replayed"
	case Stale:
		return "stale"
	case Full:
		return "full"
	}
	return fmt.Sprintf("Result(%d)", uint8(r))
}

// Errors of Seal and Connect.
var (
	ErrNoKey  = errors.New("seal: no key for this peer (auth.peers has no prefix for it and auth.key is unset)")
	ErrBuffer = errors.New("seal: buffer has no room for the 32-byte trailer")
)

// keyEntry is a configured key, ready for session derivation.
type keyEntry struct {
	prefix netip.Prefix // invalid for the fabric key
	// expand is HMAC-SHA256 keyed with HKDF-Extract(sha256, key): HKDF-Expand of one
	// 32-byte block is expand(info || 0x01), computed without allocating.
	expand hash.Hash
	// check is AES-256 under HKDF-Expand(prk, checkLabel): a session ID's last 4 bytes
	// are the first 4 of check(first 12 bytes || 0000).
	check cipher.Block
}

type sessionID [SessionIDLen]byte

func (id *sessionID) time() uint32 { return binary.BigEndian.Uint32(id[:4]) }

type txSession struct {
	id      sessionID
	dst     netip.Addr
	aead    cipher.AEAD
	key     *keyEntry
	created int64 // ns
	ctr     uint32
	retired bool // replaced: the next Seal to dst starts a new session
	nonce   [12]byte
}

type rxSession struct {
	id    sessionID
	src   netip.Addr
	aead  cipher.AEAD
	nonce [12]byte
	win   window
}

type candidate struct {
	id   sessionID
	key  *keyEntry
	aead cipher.AEAD
}

// Sealer seals outgoing and opens incoming packets for one endpoint.
type Sealer struct {
	mode       Mode
	rekeyNs    int64
	maxAgeS    int64
	skewS      int64
	maxRx      int
	fabric     *keyEntry
	peers      []*keyEntry // longest prefix first
	rng        *rand.ChaCha8
	started    bool
	epochS     int64 // seconds of the first call: sessions must not predate it (less the skew)
	lastSweepS int64

	tx     map[netip.Addr]*txSession
	lastTx *txSession
	own    map[sessionID]int64 // IDs of our sending sessions -> start (s), for reflection checks
	rx     map[sessionID]*rxSession
	lastRx *rxSession
	cand   [candSlots]candidate
	// Scratch (stack arrays would escape through the hash, block and AEAD interfaces).
	nonce   [12]byte
	blk     [2][aes.BlockSize]byte
	derived [sha256.Size]byte

	// Rekeys counts sending sessions started.
	Rekeys uint64
}

// New returns a Sealer for cfg (which must be valid, with key files loaded). seed seeds
// the random part of session IDs: give it fresh entropy (crypto/rand), never a fixed
// seed shared by hosts, since two senders under one key must not pick the same ID.
func New(cfg Config, seed [32]byte) (*Sealer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.KeyFile != "" && cfg.Key.IsZero() {
		return nil, fmt.Errorf("auth.key_file = %q: not loaded (the daemon reads key files; the engine does no I/O)", cfg.KeyFile)
	}
	s := &Sealer{
		mode:    cfg.Mode,
		rekeyNs: int64(cfg.RekeyInterval),
		maxAgeS: int64(cfg.MaxAge()+999_999_999) / 1e9,
		skewS:   int64(cfg.MaxSkew+999_999_999) / 1e9,
		maxRx:   cfg.MaxSessions,
		rng:     rand.NewChaCha8(seed),
		tx:      make(map[netip.Addr]*txSession),
		own:     make(map[sessionID]int64),
		rx:      make(map[sessionID]*rxSession),
	}
	var err error
	if !cfg.Key.IsZero() {
		if s.fabric, err = newKeyEntry(netip.Prefix{}, cfg.Key); err != nil {
			return nil, err
		}
	}
	for i, p := range cfg.Peers {
		if p.Key.IsZero() {
			return nil, fmt.Errorf("auth.peers[%d].key_file = %q: not loaded (the daemon reads key files)", i, p.KeyFile)
		}
		k, err := newKeyEntry(p.Prefix, p.Key)
		if err != nil {
			return nil, err
		}
		s.peers = append(s.peers, k)
	}
	sort.SliceStable(s.peers, func(i, j int) bool { return s.peers[i].prefix.Bits() > s.peers[j].prefix.Bits() })
	return s, nil
}

func newKeyEntry(p netip.Prefix, k Key) (*keyEntry, error) {
	prk, err := hkdf.Extract(sha256.New, k[:], nil)
	if err != nil {
		return nil, err
	}
	ck, err := hkdf.Expand(sha256.New, prk, checkLabel, 32)
	if err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(ck)
	if err != nil {
		return nil, err
	}
	return &keyEntry{prefix: p, expand: hmac.New(sha256.New, prk), check: b}, nil
}

// sessionCheck computes the check of id's first 12 bytes under k.
func (s *Sealer) sessionCheck(k *keyEntry, id *sessionID) uint32 {
	in, out := &s.blk[0], &s.blk[1]
	copy(in[:], id[:SessionIDLen-checkLen])
	clear(in[SessionIDLen-checkLen:])
	k.check.Encrypt(out[:], in[:])
	return binary.BigEndian.Uint32(out[:checkLen])
}

// Mode returns the sealing mode.
func (s *Sealer) Mode() Mode { return s.mode }

// Sessions returns the number of receiving sessions held.
func (s *Sealer) Sessions() int { return len(s.rx) }

// keyFor returns the key for peer address a: the longest matching prefix, else the fabric key.
func (s *Sealer) keyFor(a netip.Addr) *keyEntry {
	for _, k := range s.peers {
		if k.prefix.Contains(a) {
			return k
		}
	}
	return s.fabric
}

func (s *Sealer) start(now int64) {
	if !s.started {
		s.started = true
		s.epochS = floorSec(now)
		s.lastSweepS = s.epochS
	}
}

func floorSec(now int64) int64 {
	if now < 0 {
		return -((-now + 999_999_999) / 1e9)
	}
	return now / 1e9
}

var (
	labelBytes = []byte(label)
	expandTail = []byte{1} // HKDF-Expand's block counter
)

// sessionKey writes HKDF-Expand(k, label || id, 32) into s.derived (RFC 5869: one block,
// T(1) = HMAC(PRK, info || 0x01)).
func (s *Sealer) sessionKey(k *keyEntry, id *sessionID) []byte {
	h := k.expand
	h.Reset()
	h.Write(labelBytes)
	h.Write(id[:])
	h.Write(expandTail)
	return h.Sum(s.derived[:0])
}

// deriveAEAD returns AES-256-GCM under the session key of id.
func (s *Sealer) deriveAEAD(k *keyEntry, id *sessionID) (cipher.AEAD, error) {
	b, err := aes.NewCipher(s.sessionKey(k, id))
	clear(s.derived[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Connect prepares for a new connection to dst: it fails with ErrNoKey when no key
// covers dst, and starts a new sending session unless the current one began in this
// second. A peer that restarted refuses sessions begun before it (less MaxSkew), so a
// new connection must not open on an old one.
func (s *Sealer) Connect(now int64, dst netip.Addr) error {
	s.start(now)
	dst = dst.Unmap()
	if s.keyFor(dst) == nil {
		return ErrNoKey
	}
	if t := s.tx[dst]; t != nil && floorSec(t.created) < floorSec(now) {
		t.retired = true
	}
	return nil
}

// txFor returns the live sending session to dst, starting one when needed.
func (s *Sealer) txFor(now int64, dst netip.Addr) (*txSession, error) {
	t := s.lastTx
	if t == nil || t.dst != dst {
		dst = dst.Unmap()
		t = s.tx[dst]
	}
	if t == nil || t.retired || now-t.created >= s.rekeyNs || t.ctr >= RekeyPackets {
		var err error
		if t, err = s.newTx(now, dst); err != nil {
			return nil, err
		}
	}
	s.lastTx = t
	return t, nil
}

func (s *Sealer) newTx(now int64, dst netip.Addr) (*txSession, error) {
	k := s.keyFor(dst)
	if k == nil {
		return nil, ErrNoKey
	}
	t := &txSession{dst: dst, key: k, created: now}
	sec := floorSec(now)
	for {
		binary.BigEndian.PutUint32(t.id[:4], uint32(sec))
		binary.BigEndian.PutUint64(t.id[4:], s.rng.Uint64())
		binary.BigEndian.PutUint32(t.id[12:], s.sessionCheck(k, &t.id))
		_, mine := s.own[t.id]
		_, theirs := s.rx[t.id]
		if !mine && !theirs {
			break
		}
	}
	var err error
	if t.aead, err = s.deriveAEAD(k, &t.id); err != nil {
		return nil, err
	}
	s.tx[dst] = t
	s.own[t.id] = sec
	s.Rekeys++
	return t, nil
}

// Seal appends the trailer to the packet buf[:n] and returns the sealed length n+Overhead;
// buf must have room for it. hdr is the length of the packet type's fixed header: in
// Encrypt mode buf[hdr:n] is encrypted in place (all of it stays in clear when hdr >= n).
// The caller sets the header's sealed flag before calling: the tag covers it.
func (s *Sealer) Seal(now int64, dst netip.Addr, buf []byte, n, hdr int) (int, error) {
	if len(buf) < n+Overhead || n < 0 {
		return 0, ErrBuffer
	}
	s.start(now)
	t, err := s.txFor(now, dst)
	if err != nil {
		return 0, err
	}
	t.ctr++
	binary.BigEndian.PutUint32(t.nonce[8:], t.ctr)
	ad := n // bytes authenticated in clear
	if s.mode == Encrypt && hdr < n {
		ad = hdr
	}
	// In place: the ciphertext (if any) replaces the plaintext and the tag follows it.
	t.aead.Seal(buf[ad:ad], t.nonce[:], buf[ad:n], buf[:ad])
	tr := buf[n+TagLen : n+Overhead]
	copy(tr, t.id[:])
	binary.BigEndian.PutUint32(tr[SessionIDLen:], t.ctr)
	return n + Overhead, nil
}

// Open checks the sealed packet pkt from src. hdr is the length of the type's fixed
// header (see Seal). On OK and NewSession it returns the packet without its trailer: in
// Auth mode a sub-slice of pkt, which is never written; in Encrypt mode the decrypted
// packet in out, which needs len(pkt) bytes. Nothing is kept for a packet that does not
// authenticate.
func (s *Sealer) Open(now int64, src netip.Addr, pkt []byte, hdr int, out []byte) ([]byte, Result) {
	n := len(pkt) - Overhead
	if n <= 0 {
		return nil, Failed
	}
	s.start(now)
	tr := pkt[n+TagLen:]
	id := (*sessionID)(tr[:SessionIDLen])
	ctr := binary.BigEndian.Uint32(tr[SessionIDLen:])
	if ctr == 0 {
		return nil, Failed
	}
	nowS := floorSec(now)
	r := s.lastRx
	if r == nil || r.id != *id {
		r = s.rx[*id]
	}
	if r != nil {
		if r.src != src.Unmap() {
			return nil, Failed
		}
		if int64(r.id.time())+s.maxAgeS < nowS {
			s.drop(r)
			return nil, Stale
		}
		if !r.win.check(ctr) {
			return nil, Replayed
		}
		body, ok := s.open(r.aead, &r.nonce, ctr, pkt, n, hdr, out)
		if !ok {
			return nil, Failed
		}
		r.win.mark(ctr)
		s.lastRx = r
		return body, OK
	}
	// A session we do not hold: admit it if it is fresh and its first packet authenticates.
	t := int64(id.time())
	if t+s.maxAgeS < nowS || t > nowS+s.skewS || t < s.epochS-s.skewS {
		return nil, Stale
	}
	if _, mine := s.own[*id]; mine {
		return nil, Failed // one of our own packets reflected back to us
	}
	src = src.Unmap()
	k := s.keyFor(src)
	if k == nil || binary.BigEndian.Uint32(id[SessionIDLen-checkLen:]) != s.sessionCheck(k, id) {
		return nil, Failed
	}
	c := &s.cand[id[SessionIDLen-checkLen-1]%candSlots]
	if c.aead == nil || c.id != *id || c.key != k {
		a, err := s.deriveAEAD(k, id)
		if err != nil {
			return nil, Failed
		}
		*c = candidate{id: *id, key: k, aead: a}
	}
	body, ok := s.open(c.aead, &s.nonce, ctr, pkt, n, hdr, out)
	if !ok {
		return nil, Failed
	}
	if nowS != s.lastSweepS {
		s.sweep(nowS) // at most once a second: it walks every session
	}
	if len(s.rx) >= s.maxRx {
		return nil, Full
	}
	r = &rxSession{id: *id, src: src, aead: c.aead}
	*c = candidate{}
	r.win.mark(ctr)
	s.rx[*id] = r
	s.lastRx = r
	// The peer started a session newer than ours to it: it may have restarted and would
	// refuse ours, so follow it (at most once per second per peer).
	if tx := s.tx[src]; tx != nil && floorSec(tx.created) < t && floorSec(tx.created) < nowS {
		tx.retired = true
	}
	return body, NewSession
}

// open authenticates (and in Encrypt mode decrypts into out) pkt[:n] with tag pkt[n:n+TagLen].
func (s *Sealer) open(a cipher.AEAD, nonce *[12]byte, ctr uint32, pkt []byte, n, hdr int, out []byte) ([]byte, bool) {
	binary.BigEndian.PutUint32(nonce[8:], ctr)
	if s.mode != Encrypt || hdr >= n {
		if _, err := a.Open(nil, nonce[:], pkt[n:n+TagLen], pkt[:n]); err != nil {
			return nil, false
		}
		return pkt[:n], true
	}
	if len(out) < n {
		return nil, false
	}
	copy(out[:hdr], pkt[:hdr])
	if _, err := a.Open(out[hdr:hdr], nonce[:], pkt[hdr:n+TagLen], pkt[:hdr]); err != nil {
		return nil, false
	}
	return out[:n], true
}

func (s *Sealer) drop(r *rxSession) {
	delete(s.rx, r.id)
	if s.lastRx == r {
		s.lastRx = nil
	}
}

// sweep forgets receiving sessions older than MaxAge (their packets would be refused
// anyway, so forgetting them opens no replay hole) and our own old session IDs.
func (s *Sealer) sweep(nowS int64) {
	s.lastSweepS = nowS
	for _, r := range s.rx {
		if int64(r.id.time())+s.maxAgeS < nowS {
			s.drop(r)
		}
	}
	for id, t := range s.own {
		if t+s.maxAgeS < nowS {
			delete(s.own, id)
		}
	}
}

// window is a sliding replay window over 32-bit counters (RFC 6479): a ring of
// replayWords words; counters more than ReplayWindow behind the highest seen are refused.
type window struct {
	top  uint32 // highest counter marked (0: none)
	bits [replayWords]uint64
}

// check reports whether ctr may be accepted (not seen, not too old). It changes nothing.
func (w *window) check(ctr uint32) bool {
	if ctr > w.top {
		return true
	}
	if w.top-ctr >= ReplayWindow {
		return false
	}
	return w.bits[(ctr/64)%replayWords]&(1<<(ctr%64)) == 0
}

// mark records ctr, which check accepted.
func (w *window) mark(ctr uint32) {
	if ctr > w.top {
		cur, nxt := w.top/64, ctr/64
		if d := nxt - cur; d >= replayWords {
			w.bits = [replayWords]uint64{}
		} else {
			for i := cur + 1; i <= nxt; i++ {
				w.bits[i%replayWords] = 0
			}
		}
		w.top = ctr
	}
	w.bits[(ctr/64)%replayWords] |= 1 << (ctr % 64)
}
