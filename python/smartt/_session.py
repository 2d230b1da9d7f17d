"""The messaging session: protocol negotiation, frames, progress, blocking calls."""
import collections
import errno
import fcntl
import ipaddress
import json
import mmap
import os
import select
import socket
import struct
import time

from ._errors import (EBUSY, ECLOSED, ECONNECT, EFAILED, EHTTP, EINVAL, EIO, ENOTSUP, EPROTO,
                      EVERSION, Error, Timeout, edaemon)

DEFAULT_SOCKET = "/run/smartt/smarttd.sock"
MAX_PAYLOAD = 1 << 20
HEADROOM = 12
MAX_MESSAGE = 1 << 30
MAX_RELEASE = 64
# The automatic receive ring (as the Go client's): set up when a message of at least
# auto_ring bytes first arrives over the socket, holding AUTO_RING_MSGS of them (at most
# MAX_AUTO_RING and the daemon's max); messages of AUTO_RING_MIN and more then come
# through it and are copied out, so received data stays the caller's own bytearray.
AUTO_RING = 1 << 20
AUTO_RING_MIN = 64 << 10
AUTO_RING_MSGS = 4
MAX_AUTO_RING = 64 << 20

F_BIND, F_SEND, F_DATA, F_SENDFD, F_RECVRING, F_RELEASE, F_WANTSENT, F_CANCEL = range(1, 9)
F_BOUND, F_SENT, F_FAILED, F_RECV, F_ERROR, F_RINGOK, F_RECVAT, F_ACCEPTED, F_CANCELRES = range(0x81, 0x8a)

# Event types (as libsmartt's SMARTT_EV_*).
BOUND, SENT, FAILED, ACCEPTED, RECV, ERROR, RING_OK, CANCEL_RESULT = range(1, 9)
CANCELLED, CANCEL_IN_FLIGHT, CANCEL_UNKNOWN = 0, 1, 2

_HDR = struct.Struct(">B3xII")
_SENDH = struct.Struct(">16sHIQ")
_RECVH = struct.Struct(">16sHIIQ")
_U64 = struct.Struct(">Q")
_SENT = struct.Struct(">QQQQ")
_SEND_DATA = struct.Struct(">B3xII16sHIQB3xII")  # a Send frame and its first Data header
_MAPPED = b"\0" * 10 + b"\xff\xff"


def default_socket():
    """$SMARTT_SOCKET if set and not empty, else /run/smartt/smarttd.sock (as the CLI)."""
    return os.environ.get("SMARTT_SOCKET") or DEFAULT_SOCKET


_packed, _hosts = {}, {}  # address conversions, cached: ipaddress costs microseconds


def _remember(cache, k, v):
    if len(cache) >= 4096:
        cache.clear()
    cache[k] = v


class Addr(collections.namedtuple("Addr", "host port endpoint")):
    """A destination or sender: host (str), UDP port, endpoint."""

    @classmethod
    def parse(cls, hostport, endpoint):
        """Addr from "HOST:PORT" ("127.0.0.2:23600", "[::1]:23600") and an endpoint."""
        host, sep, port = hostport.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise Error(EINVAL, "want HOST:PORT, not %r" % hostport)
        return cls(host.strip("[]"), int(port), endpoint)

    def packed(self):
        p = _packed.get(self.host)
        if p is None:
            a = ipaddress.ip_address(self.host)
            p = (_MAPPED + a.packed) if a.version == 4 else a.packed
            _remember(_packed, self.host, p)
        return p

    @classmethod
    def unpack(cls, raw, port, endpoint):
        raw = bytes(raw)
        host = _hosts.get(raw)
        if host is None:
            a = ipaddress.IPv6Address(raw)
            host = str(a.ipv4_mapped) if a.ipv4_mapped else str(a)
            _remember(_hosts, raw, host)
        return cls(host, port, endpoint)

    def __str__(self):
        h = "[%s]" % self.host if ":" in self.host else self.host
        return "%s:%d/%d" % (h, self.port, self.endpoint)


class Event:
    """An outcome, reply or received message. RECV: .sender, .endpoint, .size, .data
    (a bytearray, or a read-only memoryview into the receive ring: call .release())."""

    __slots__ = ("type", "tag", "status", "endpoint", "cancel", "elapsed_ns", "srtt_ns",
                 "window", "retransmissions", "sender", "size", "data", "in_ring", "text",
                 "_sess")

    def __init__(self, type, tag):
        self.type, self.tag, self.status, self.text = type, tag, 0, ""
        self.endpoint = self.cancel = self.size = 0
        self.elapsed_ns = self.srtt_ns = self.window = self.retransmissions = 0
        self.sender, self.data, self.in_ring, self._sess = None, None, False, None

    def release(self):
        """Gives back a ring message's space (needed for ring messages; harmless else)."""
        s, self._sess = self._sess, None
        if s is not None and self.in_ring:
            self.data.release()
            s._release(self.tag)
        self.data = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return "Event(type=%d, tag=%d, size=%d, status=%d)" % (self.type, self.tag, self.size, self.status)


class Memfd:
    """A sealed memfd for zero-copy sends: write the message into .buf (a memoryview of
    capacity bytes), then Session.send_memfd. Reusable once the message's outcome came."""

    def __init__(self, capacity):
        if not 0 < capacity <= MAX_MESSAGE:
            raise Error(EINVAL, "capacity 1..1 GiB")
        self.fd = os.memfd_create("smartt-send", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, capacity + HEADROOM)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            self._map = mmap.mmap(self.fd, capacity + HEADROOM)
        except OSError:
            os.close(self.fd)
            raise
        self.capacity = capacity
        self.buf = memoryview(self._map)[HEADROOM:]

    def close(self):
        if self.fd >= 0:
            self.buf.release()
            self._map.close()
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _connect(path, timeout):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except OSError as e:
        s.close()
        raise Error(ECONNECT, "%s: %s" % (path, e.strerror or e)) from None
    return s


def _read_head(sock):
    """Reads an HTTP response head; returns (status, headers, rest of the bytes)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > 16384:
            raise Error(EPROTO, "response head too long")
        try:
            chunk = sock.recv(16384)
        except socket.timeout:
            raise Timeout("waiting for the daemon's response") from None
        if not chunk:
            raise Error(ECLOSED, "connection closed during the HTTP exchange")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        raise Error(EPROTO, "bad status line %r" % lines[0]) from None
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, rest


def _json_error(body):
    try:
        return json.loads(body.decode("utf-8", "replace")).get("error", "")
    except (ValueError, AttributeError):
        return body[:200].decode("utf-8", "replace")


def get(path, socket_path=None, timeout=10.0):
    """GET path (e.g. "/v1/status") from the daemon; returns the decoded JSON. Raises
    Error(EHTTP) with the daemon's error text on a status other than 200."""
    s = _connect(socket_path or default_socket(), timeout)
    try:
        s.sendall(("GET %s HTTP/1.0\r\nHost: smarttd\r\n\r\n" % path).encode())
        status, _, body = _read_head(s)
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            body += chunk
            if len(body) > 64 << 20:
                raise Error(EPROTO, "response too large")
    finally:
        s.close()
    if status != 200:
        raise Error(EHTTP, "HTTP %d: %s" % (status, _json_error(body)))
    return json.loads(body)


class Session:
    """A messaging session with one daemon (smartt-msg/2 when it speaks it, else /1).
    Not thread-safe: serialize calls on one session. Use as a context manager.

    Blocking: bind, send, recv, wait, enable_ring (timeout in seconds, None: for ever).
    auto_ring: the received message size from which the session sets up a receive ring
    by itself (AUTO_RING; None or 0: never); see ring_auto.
    Non-blocking: *_start/*_async calls, fileno() to poll (POLLOUT too while
    want_write()), progress(), poll_completion()."""

    def __init__(self, socket_path=None, timeout=10.0, max_version=2, lazy_sent=True,
                 sendfd_threshold=4 << 20, auto_ring=AUTO_RING):
        if max_version not in (1, 2):
            raise Error(EINVAL, "max_version 1 or 2")
        self.socket_path = socket_path or default_socket()
        # send() passes messages of at least this many bytes through a memfd of the
        # session's (one copy instead of the socket's two); None or negative: never.
        self.sendfd_threshold = sendfd_threshold
        self._big = None
        self._sock = None
        self.version = 0
        self.sendfd = self.lazy_sent = False
        self.max_ring = 0
        self.endpoint = 0
        self._err = None
        self._tag = 0
        self._out = collections.deque()  # [memoryview, fd or -1]
        self._rel = []
        self._in = bytearray(256 << 10)
        self._inv = memoryview(self._in)
        self._inlen = 0
        self._cur = None  # the Event being received over the socket
        self._cur_got = 0
        self._direct = 0  # bytes of the current Data payload to read straight into it
        self._ring = self._ringmap = None
        self._ring_tag = 0
        self.auto_ring = auto_ring
        self.ring_auto = 0  # the automatic ring's size once the daemon took it
        self._auto = "idle"  # idle, trying, on, off
        self._auto_tag = 0
        self._received = False
        self._done = collections.deque()
        self._recv = collections.deque()
        self._poll, self._poll_ev = None, select.POLLIN
        self._last_words = None
        offer = "smartt-msg/2, smartt-msg/1" if max_version == 2 else "smartt-msg/1"
        try:
            r = self._try_open(offer, timeout, lazy_sent)
            if r == 426 and max_version == 2:  # a v1 daemon refuses the list
                r = self._try_open("smartt-msg/1", timeout, lazy_sent)
            if r == 426:
                raise Error(EVERSION, self._refusal)
        except BaseException:
            self.close()
            raise

    def _try_open(self, offer, timeout, lazy):
        if self._sock is not None:
            self._sock.close()
        self._sock = _connect(self.socket_path, timeout)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        req = ("POST /v1/session HTTP/1.1\r\nHost: smarttd\r\nConnection: Upgrade\r\n"
               "Upgrade: %s\r\n%sContent-Length: 0\r\n\r\n" % (offer, "Smartt-Lazy-Sent: 1\r\n" if lazy else ""))
        try:
            self._sock.sendall(req.encode())
            status, h, rest = _read_head(self._sock)
        except BaseException:
            self._sock.close()
            raise
        if status != 101:
            self._refusal = _json_error(rest)
            if status == 426:
                return 426
            self._sock.close()
            raise Error(EBUSY if status == 503 else EHTTP, "HTTP %d: %s" % (status, self._refusal))
        self._upgraded(h, rest)
        return 101

    def _upgraded(self, h, rest):
        up = h.get("upgrade", "")
        if up not in ("smartt-msg/1", "smartt-msg/2"):
            self._sock.close()
            raise Error(EVERSION, "daemon upgraded to %r" % up)
        self.version = int(up[-1])
        if "smartt-version" in h and h["smartt-version"] != str(self.version):
            self._sock.close()
            raise Error(EPROTO, "Smartt-Version %s with Upgrade %s" % (h["smartt-version"], up))
        self.sendfd = h.get("smartt-sendfd") == "1"
        self.lazy_sent = h.get("smartt-lazy-sent") == "1"
        try:
            self.max_ring = int(h.get("smartt-recv-ring", "0")) if self.sendfd else 0
        except ValueError:
            self.max_ring = 0
        self._sock.setblocking(False)
        self._inv[:len(rest)] = rest
        self._inlen = len(rest)
        self._parse()

    @property
    def can_cancel(self):
        """Cancel and Accepted events: protocol 2."""
        return self.version >= 2

    def fileno(self):
        return self._sock.fileno()

    def want_write(self):
        """True while bytes are queued: poll for writing too."""
        return bool(self._out)

    def close(self):
        """Ends the session; unreleased ring messages become invalid."""
        if self._big is not None:
            self._big.close()
            self._big = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        for _, fd in self._out:
            if fd >= 0:
                os.close(fd)
        self._out.clear()
        if self._ringmap is not None:
            try:
                self._ringmap.close()
            except BufferError:
                pass  # a message still aliases it: the map goes with its last view

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fail(self, code, text=""):
        if self._err is None:
            self._err = Error(code, text)
        raise self._err

    def _check(self):
        if self._err is not None:
            raise self._err
        if self._sock is None:
            raise Error(EINVAL, "session closed")

    def _next_tag(self):
        self._tag = (self._tag + 1) & 0xFFFFFFFF or 1
        return self._tag

    # ---- output ----

    def _queue(self, frames, fd=-1):
        for i, f in enumerate(frames):
            self._out.append([memoryview(bytes(f)), os.dup(fd) if fd >= 0 and i == 0 else -1])

    def _flush(self):
        """Writes what the socket takes now; a descriptor goes with its frame's first byte."""
        out = self._out
        while out:
            first = out[0]
            if first[1] >= 0:
                bufs, anc = [first[0]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", first[1]))]
            else:
                bufs, anc = [], []
                for e in out:
                    if e[1] >= 0 or len(bufs) >= 512:
                        break
                    bufs.append(e[0])
            try:
                n = self._sock.sendmsg(bufs, anc)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._fail(ECLOSED if e.errno in (errno.EPIPE, errno.ECONNRESET) else EIO, str(e))
            if first[1] >= 0:
                os.close(first[1])
                first[1] = -1
            while n and out:
                e = out[0]
                if n >= len(e[0]):
                    n -= len(e[0])
                    out.popleft()
                else:
                    e[0] = e[0][n:]
                    n = 0

    def _releases_frame(self):
        rel, self._rel = self._rel, []
        return _HDR.pack(F_RELEASE, 0, 4 * len(rel)) + struct.pack(">%dI" % len(rel), *rel)

    def _request(self, typ, tag, payload=b"", fd=-1):
        self._check()
        if self._rel:
            self._queue([self._releases_frame()])
        self._queue([_HDR.pack(typ, tag, len(payload)) + payload], fd)
        self._flush()

    def _write_direct(self, bufs, deadline):
        """Writes bufs straight from the caller's memory; deadline False: queue (copy)
        what the socket does not take now; else wait for the socket until deadline."""
        bufs = [memoryview(b).cast("B") for b in bufs]
        while bufs:
            try:
                n = self._sock.sendmsg(bufs[:512])
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                self._fail(ECLOSED if e.errno in (errno.EPIPE, errno.ECONNRESET) else EIO, str(e))
            while n and bufs:
                if n >= len(bufs[0]):
                    n -= len(bufs.pop(0))
                else:
                    bufs[0] = bufs[0][n:]
                    n = 0
            if not bufs:
                return
            if deadline is False:
                self._queue(bufs)
                return
            if not self._wait_io(deadline, True):
                self._fail(EIO, "timed out in the middle of a message: the session is cut")

    # ---- requests ----

    def bind_start(self, endpoint=0):
        """Asks for endpoint (0: the daemon picks one); a BOUND or ERROR event answers."""
        tag = self._next_tag()
        self._request(F_BIND, tag, struct.pack(">I", endpoint))
        return tag

    def _send(self, to, data, deadline):
        self._check()
        mv = memoryview(data).cast("B")
        n = len(mv)
        if not 0 < n <= MAX_MESSAGE:
            raise Error(EINVAL, "message size 1..1 GiB")
        tag = self._next_tag()
        bufs = [self._releases_frame()] if self._rel else []
        head = _SEND_DATA.pack(F_SEND, tag, 30, to.packed(), to.port, to.endpoint, n, F_DATA, tag, min(n, MAX_PAYLOAD))
        if n <= 4096:  # small: one buffer (cheaper than a gather of three)
            bufs.append(head + mv)
        else:
            bufs.append(head)
            bufs.append(mv[:MAX_PAYLOAD])
        for off in range(MAX_PAYLOAD, n, MAX_PAYLOAD):
            chunk = mv[off:off + MAX_PAYLOAD]
            bufs.append(_HDR.pack(F_DATA, tag, len(chunk)))
            bufs.append(chunk)
        if self._out:  # behind queued bytes: copy
            self._queue(bufs)
            self._flush()
            while deadline is not False and self._out:
                if not self._wait_io(deadline, True):
                    raise Timeout("writing the message")
        else:
            self._write_direct(bufs, deadline)
        return tag

    def _send_big(self, to, data):
        """Sends a large message from the session's memfd; None if it is not one."""
        n = memoryview(data).nbytes
        th = self.sendfd_threshold
        if not self.sendfd or th is None or th < 0 or n < th or n > MAX_MESSAGE:
            return None
        if self._big is None or self._big.capacity < n:
            if self._big is not None:
                self._big.close()
            try:
                self._big = Memfd(min(MAX_MESSAGE, (n + (1 << 20) - 1) & ~((1 << 20) - 1)))
            except OSError:
                self._big = None
                return None  # no memfd to be had: stream
        self._big.buf[:n] = memoryview(data).cast("B")
        return self.send_memfd(to, self._big, n)

    def send_async(self, to, data):
        """Sends data (any bytes-like; reusable when this returns) to Addr to; returns the
        tag of its SENT, FAILED or ERROR event (v2: after an ACCEPTED one)."""
        return self._send(to, data, False)

    def send_fd_async(self, to, fd, size):
        """Sends size bytes at offset 12 of a memfd sealed against shrinking and growing
        (SCM_RIGHTS, zero copy). Raises Error(ENOTSUP) if the session cannot pass fds."""
        if not self.sendfd:
            raise Error(ENOTSUP, "the daemon takes no SendFD on this session")
        if not 0 < size <= MAX_MESSAGE:
            raise Error(EINVAL, "message size 1..1 GiB")
        tag = self._next_tag()
        self._request(F_SENDFD, tag, _SENDH.pack(to.packed(), to.port, to.endpoint, size), fd)
        return tag

    def send_memfd(self, to, memfd, size):
        """Sends the first size bytes of memfd.buf without copying them."""
        if not 0 < size <= memfd.capacity:
            raise Error(EINVAL, "size beyond the memfd's capacity")
        return self.send_fd_async(to, memfd.fd, size)

    def want_sent(self, tag):
        """Asks for a message's lazily held Sent frame now."""
        if self.lazy_sent:
            self._request(F_WANTSENT, tag)

    def cancel(self, tag):
        """Cancels message tag (protocol 2); a CANCEL_RESULT event answers (.cancel:
        CANCELLED, CANCEL_IN_FLIGHT or CANCEL_UNKNOWN). Error(ENOTSUP) on protocol 1."""
        if self.version < 2:
            raise Error(ENOTSUP, "Cancel needs smartt-msg/2; this daemon speaks smartt-msg/%d" % self.version)
        self._request(F_CANCEL, tag)

    def ring_start(self, size, min_message=0):
        """Sets up a receive ring of size bytes (a page multiple); RING_OK or ERROR answers."""
        if self._auto == "idle":
            self._auto = "off"  # a ring of the caller's: no automatic one
        if not self.max_ring:
            raise Error(ENOTSUP, "the daemon offers no receive ring on this session")
        if self._ring is not None or size <= 0 or size % mmap.PAGESIZE or size > MAX_MESSAGE:
            raise Error(EINVAL, "one ring per session, a page multiple up to 1 GiB")
        fd = os.memfd_create("smartt-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            os.posix_fallocate(fd, 0, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            self._ringmap = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            self._ring = memoryview(self._ringmap)
            tag = self._ring_tag = self._next_tag()
            pl = _U64.pack(size) + (_U64.pack(min_message) if min_message else b"")
            self._request(F_RECVRING, tag, pl, fd)
        finally:
            os.close(fd)
        return tag

    def _release(self, tag):
        if self._err is not None or self._sock is None:
            return
        self._rel.append(tag)
        if len(self._rel) >= MAX_RELEASE:
            self._queue([self._releases_frame()])
            self._flush()

    # ---- input ----

    def progress(self):
        """Writes and reads what it can without blocking, queues the events; returns how
        many are queued. Raises the session's error once it broke."""
        self._check()
        if self._rel:
            self._queue([self._releases_frame()])
        if self._out:
            self._flush()
        self._read()
        return len(self._done) + len(self._recv)

    def _read(self):
        for _ in range(64):
            want = 0
            try:
                if self._direct:
                    cur = memoryview(self._cur.data)[self._cur_got:self._cur_got + self._direct]
                    n = self._sock.recvmsg_into([cur, self._inv[self._inlen:]])[0]
                    a = min(n, self._direct)
                    self._cur_got += a
                    self._direct -= a
                    self._inlen += n - a
                    if not self._direct:
                        self._cur_done()
                else:
                    want = len(self._in) - self._inlen
                    n = self._sock.recv_into(self._inv[self._inlen:])
                    self._inlen += n
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._fail(ECLOSED if e.errno == errno.ECONNRESET else EIO, str(e))
            if n == 0:
                why = self._last_words  # the daemon's tag-0 Error 1 or 11, if it sent one
                self._fail(why.status if why else ECLOSED, why.text if why else "")
            if not self._direct:
                self._parse()
                if 0 < n < want:
                    return  # a short read: the socket is drained

    def _parse(self):
        off, inv, end = 0, self._inv, self._inlen
        try:
            while end - off >= 12:
                typ, tag, ln = _HDR.unpack_from(inv, off)
                if inv[off + 1] or inv[off + 2] or inv[off + 3] or ln > MAX_PAYLOAD:
                    self._fail(EPROTO, "bad frame header")
                have = end - off - 12
                cur = self._cur
                if typ == F_DATA and have < ln and cur is not None and tag == cur.tag and 0 < ln <= cur.size - self._cur_got:
                    cur.data[self._cur_got:self._cur_got + have] = inv[off + 12:end]
                    self._cur_got += have
                    self._direct = ln - have
                    off = end
                    break
                if have < ln:
                    if 12 + ln > len(self._in):  # a large non-Data frame: grow
                        self._inv.release()
                        self._in.extend(bytes(12 + ln - len(self._in)))
                        self._inv = inv = memoryview(self._in)
                    break
                self._frame(typ, tag, inv[off + 12:off + 12 + ln])
                off += 12 + ln
        finally:
            if off:
                self._inv[:end - off] = self._inv[off:end]  # memoryview copies overlap safely
                self._inlen = end - off

    def _cur_done(self):
        if self._cur_got >= self._cur.size:
            self._received = True
            self._recv.append(self._cur)
            self._cur = None

    def _frame(self, typ, tag, p):
        n = len(p)
        if tag and tag == self._auto_tag and typ in (F_RINGOK, F_ERROR):
            return self._auto_reply(typ, p)
        if typ == F_DATA:
            cur = self._cur
            if cur is None or tag != cur.tag or n == 0 or n > cur.size - self._cur_got:
                self._fail(EPROTO, "Data frame outside its message")
            cur.data[self._cur_got:self._cur_got + n] = p
            self._cur_got += n
            self._cur_done()
            return
        if typ in (F_RECV, F_RECVAT):
            return self._on_recv(typ, tag, p)
        e = Event(0, tag)
        if typ == F_BOUND and n == 4:
            e.type, e.endpoint = BOUND, struct.unpack(">I", p)[0]
            self.endpoint = e.endpoint
        elif typ == F_SENT and n == 32:
            e.type = SENT
            e.elapsed_ns, e.srtt_ns, e.window, e.retransmissions = _SENT.unpack(p)
        elif typ == F_FAILED:
            e.type, e.status, e.text = FAILED, EFAILED, bytes(p[:512]).decode("utf-8", "replace")
        elif typ == F_ERROR and n >= 2:
            e.type, e.status = ERROR, edaemon(struct.unpack(">H", p[:2])[0])
            e.text = bytes(p[2:514]).decode("utf-8", "replace")
            if tag == 0:
                if e.status in (edaemon(1), edaemon(11)):
                    self._last_words = e
                self._recv.append(e)
                return
            if tag == self._ring_tag:  # the ring was refused
                self._drop_ring()
        elif typ == F_RINGOK and n == 8 and tag and tag == self._ring_tag:
            e.type, e.size = RING_OK, _U64.unpack(p)[0]
            self._ring_tag = 0
        elif typ == F_ACCEPTED and n == 0 and self.version >= 2:
            e.type = ACCEPTED
        elif typ == F_CANCELRES and n == 1 and self.version >= 2 and p[0] <= 2:
            e.type, e.cancel = CANCEL_RESULT, p[0]
        else:
            self._fail(EPROTO, "unexpected frame 0x%02x of %d bytes" % (typ, n))
        self._done.append(e)

    def _auto_start(self, size):
        """Sets up the automatic ring for messages of size bytes, if it is worth it."""
        self._auto = "off"  # at most once
        cap = min(MAX_AUTO_RING, self.max_ring)
        ring = -(-size * AUTO_RING_MSGS // mmap.PAGESIZE) * mmap.PAGESIZE
        if 2 * size > cap or self._ring is not None or self._err is not None:
            return
        try:
            self._auto_tag = self.ring_start(min(ring, cap // mmap.PAGESIZE * mmap.PAGESIZE), AUTO_RING_MIN)
            self._auto = "trying"
        except (OSError, Error):
            self._auto_tag = 0

    def _auto_reply(self, typ, p):
        self._auto_tag = 0
        if typ == F_RINGOK and len(p) == 8:
            self._auto, self.ring_auto, self._ring_tag = "on", _U64.unpack(p)[0], 0
        else:
            self._auto = "off"
            self._drop_ring()

    def _drop_ring(self):
        self._ring.release()
        self._ringmap.close()
        self._ring = self._ringmap = None
        self._ring_tag = 0

    def _on_recv(self, typ, tag, p):
        want = 34 if typ == F_RECV else 42
        if len(p) != want or self._cur is not None or (typ == F_RECVAT and self._ring is None):
            self._fail(EPROTO, "bad Recv frame")
        raw, port, sep, ep, size = _RECVH.unpack_from(p)
        e = Event(RECV, tag)
        e.sender, e.endpoint, e.size, e._sess = Addr.unpack(raw, port, sep), ep, size, self
        if size == 0 or size > MAX_MESSAGE:
            self._fail(EPROTO, "Recv of %d bytes" % size)
        if typ == F_RECVAT:
            off = _U64.unpack_from(p, 34)[0]
            if size > len(self._ring) or off > len(self._ring) - size:
                self._fail(EPROTO, "RecvAt beyond the ring")
            e.data, e.in_ring = self._ring[off:off + size], True
            if self._auto == "on":  # copied out: the caller owns what it receives
                e.data, e.in_ring = bytearray(e.data), False
                self._release(tag)
            self._received = True
            self._recv.append(e)
            return
        e.data = bytearray(size)
        self._cur, self._cur_got = e, 0
        if self.auto_ring and size >= self.auto_ring and self._auto == "idle" and self.max_ring:
            self._auto_start(size)

    def poll_completion(self):
        """The oldest queued event (replies and outcomes before received messages), or
        None. It does not read the socket: call progress()."""
        if self._done:
            return self._done.popleft()
        if self._recv:
            return self._recv.popleft()
        return None

    def poll_outcome(self):
        """poll_completion without received messages: the oldest reply or outcome, or None."""
        return self._done.popleft() if self._done else None

    # ---- blocking ----

    def _flush_pending(self):
        if self._rel:
            self._queue([self._releases_frame()])
        if self._out:
            self._flush()

    def _wait_io(self, deadline, write=False):
        p = self._poll
        if p is None:
            p = self._poll = select.poll()
            p.register(self._sock, select.POLLIN)
        ev = select.POLLIN | (select.POLLOUT if write or self._out else 0)
        if ev != self._poll_ev:
            p.modify(self._sock, ev)
            self._poll_ev = ev
        left = None if deadline is None else deadline - time.monotonic()
        late = left is not None and left <= 0
        p.poll(None if left is None else 0 if late else int(left * 1000 + 0.999))
        self.progress()
        return not late  # False: the deadline had passed (this was the last look)

    @staticmethod
    def _deadline(timeout):
        return None if timeout is None else time.monotonic() + timeout

    def wait(self, tag, types, timeout=None):
        """Waits for the next event with tag and a type in types (a set); other events
        stay queued."""
        deadline = self._deadline(timeout)
        while True:
            for i, e in enumerate(self._done):
                if e.tag == tag and e.type in types:
                    del self._done[i]
                    return e
            self._check()
            self._flush_pending()
            if not self._wait_io(deadline):  # poll, then progress: no read that finds nothing
                for i, e in enumerate(self._done):
                    if e.tag == tag and e.type in types:
                        del self._done[i]
                        return e
                raise Timeout()

    def bind(self, endpoint=0, timeout=None):
        """Binds endpoint (0: the daemon picks a free one) and returns it."""
        e = self.wait(self.bind_start(endpoint), {BOUND, ERROR}, timeout)
        if e.type == ERROR:
            raise Error(e.status, e.text)
        return e.endpoint

    def send(self, to, data, timeout=None):
        """Sends data and waits for its outcome: returns the SENT event, raises Error on
        FAILED (EFAILED) or a refusal (the daemon's code, e.g. edaemon(2): not bound)."""
        deadline = self._deadline(timeout)
        tag = self._send_big(to, data)
        big = tag is not None
        if not big:
            tag = self._send(to, data, deadline)
        if self._received:
            self.want_sent(tag)
        try:
            e = self.wait(tag, {SENT, FAILED, ERROR}, None if deadline is None else max(0, deadline - time.monotonic()))
        except Timeout:
            if big:  # still in flight: the next large send takes a new memfd
                self._big.close()
                self._big = None
            raise
        if big and e.type == ERROR and e.status == edaemon(9):  # memfds refused: stream
            self.sendfd_threshold = None
            return self.send(to, data, None if deadline is None else max(0, deadline - time.monotonic()))
        for a in [a for a in self._done if a.tag == tag and a.type == ACCEPTED]:
            self._done.remove(a)
        if e.status:
            raise Error(e.status, e.text)
        return e

    def recv(self, timeout=None):
        """Waits for a received message (an Event of type RECV); a tag-0 Error (e.g. a
        drop notice) is raised as Error."""
        deadline = self._deadline(timeout)
        while not self._recv:
            self._check()
            self._flush_pending()
            if not self._wait_io(deadline) and not self._recv:
                raise Timeout()
        e = self._recv.popleft()
        if e.type == ERROR:
            raise Error(e.status, e.text)
        return e

    def enable_ring(self, size, min_message=0, timeout=None):
        """Sets up a receive ring and waits for the daemon's answer."""
        e = self.wait(self.ring_start(size, min_message), {RING_OK, ERROR}, timeout)
        if e.type == ERROR:
            raise Error(e.status, e.text)

    def status(self):
        """GET /v1/status as a dict."""
        return get("/v1/status", self.socket_path)

    def counters(self):
        """GET /v1/counters as a dict."""
        return get("/v1/counters", self.socket_path)
