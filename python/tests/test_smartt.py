"""The smartt package against two real daemons (those of $SMARTT_A_SOCK ... when
python/tests/daemons.py runs the suite, else two started here), and a fake daemon
for version negotiation and hostile frames."""
import os
import socket
import struct
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import smartt  # noqa: E402
from daemons import Daemons  # noqa: E402

T = 20.0
_d = None
A = B = AADDR = BADDR = None


def setUpModule():
    global _d, A, B, AADDR, BADDR
    if os.environ.get("SMARTT_A_SOCK"):
        e = os.environ
        A, B, AADDR, BADDR = e["SMARTT_A_SOCK"], e["SMARTT_B_SOCK"], e["SMARTT_A_ADDR"], e["SMARTT_B_ADDR"]
        return
    _d = Daemons().__enter__()
    A, B = _d.socks
    AADDR, BADDR = _d.addrs


def tearDownModule():
    if _d is not None:
        _d.__exit__(None, None, None)


def pattern(n, seed):
    return bytes((i * 31 + seed) & 0xFF for i in range(256)) * (n // 256) + bytes(n % 256)


class Live(unittest.TestCase):
    def pair(self, ea=0, eb=0):
        a, b = smartt.Session(A), smartt.Session(B)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        return a, b, a.bind(ea, T), b.bind(eb, T)

    def test_version_and_caps(self):
        with smartt.Session(A) as s:
            speaks2 = "smartt-msg/2" in str(smartt.get("/v1/version", A))
            self.assertEqual(s.version, 2 if speaks2 else 1)
            self.assertTrue(s.sendfd)
            self.assertGreater(s.max_ring, 0)
            self.assertEqual(s.can_cancel, s.version == 2)
        with smartt.Session(A, max_version=1) as s:
            self.assertEqual(s.version, 1)
            with self.assertRaises(smartt.Error) as cm:
                s.cancel(1)
            self.assertEqual(cm.exception.code, smartt.ENOTSUP)

    def test_small_both_ways(self):
        a, b, ea, eb = self.pair(5151, 0)
        self.assertEqual(ea, 5151)
        self.assertNotEqual(eb, 0)
        ev = b.send(smartt.Addr.parse(AADDR, ea), b"hello", T)
        self.assertEqual(ev.type, smartt.SENT)
        with a.recv(T) as m:
            self.assertEqual(bytes(m.data), b"hello")
            self.assertEqual(str(m.sender), "%s/%d" % (BADDR, eb))
            self.assertEqual(m.endpoint, ea)
            a.send(m.sender, memoryview(b"xxworld!")[2:], T)  # a memoryview slice, no copy
        with b.recv(T) as m:
            self.assertEqual(bytes(m.data), b"world!")
        with self.assertRaises(smartt.Timeout):
            b.recv(0.05)

    def test_poll_outcome_leaves_messages(self):
        a, b, ea, eb = self.pair()
        b.send(smartt.Addr.parse(AADDR, ea), b"y", T)
        tag = a.send_async(smartt.Addr.parse(BADDR, eb), b"x")
        self.assertEqual(a.wait(tag, {smartt.SENT}, T).type, smartt.SENT)
        while True:
            e = a.poll_outcome()
            if e is None:
                break
            self.assertNotEqual(e.type, smartt.RECV)
        with a.recv(T) as m:
            self.assertEqual(bytes(m.data), b"y")
        b.recv(T).release()

    def test_large_and_nonblocking(self):
        a, b, ea, eb = self.pair()
        to = smartt.Addr.parse(BADDR, eb)
        msgs = [pattern(64, i) if i % 10 else pattern((3 << 20) + 5, i) for i in range(30)]
        tags = [a.send_async(to, m) for m in msgs]
        import select
        sent, got = set(), 0
        p = select.poll()
        p.register(b, select.POLLIN)
        p.register(a, select.POLLIN)
        while (len(sent) < len(tags) or got < len(msgs)):
            if a.want_write():
                p.modify(a, select.POLLIN | select.POLLOUT)
            self.assertTrue(p.poll(10000), "stalled")
            a.progress()
            b.progress()
            while True:
                e = a.poll_completion()
                if e is None:
                    break
                self.assertIn(e.type, (smartt.SENT, smartt.ACCEPTED))
                if e.type == smartt.SENT:
                    sent.add(e.tag)
            while True:
                e = b.poll_completion()
                if e is None:
                    break
                self.assertEqual(e.type, smartt.RECV)
                self.assertEqual(bytes(e.data), msgs[got])
                got += 1
                e.release()
        self.assertEqual(sent, set(tags))

    def test_large_send_through_memfd(self):
        def memfds():
            return smartt.get("/v1/counters", A)["api"].get("msgs_memfd", 0)
        for threshold, want in ((4 << 20, 2), (-1, 0)):
            a, b, ea, eb = self.pair()
            a.sendfd_threshold = threshold
            to = smartt.Addr.parse(BADDR, eb)
            before = memfds()
            for i, n in enumerate((3 << 20, 4 << 20, (9 << 20) + 3)):
                data = bytearray(pattern(n, i))
                a.send(to, data, T)
                data[:] = bytes(n)  # the caller's buffer is its own again
                with b.recv(T) as m:
                    self.assertTrue(m.data == pattern(n, i))
            self.assertEqual(memfds() - before, want)

    def test_memfd(self):
        a, b, ea, eb = self.pair()
        to = smartt.Addr.parse(BADDR, eb)
        with smartt.Memfd(8 << 20) as m:
            for r in range(2):
                data = pattern(8 << 20, r)
                m.buf[:len(data)] = data
                tag = a.send_memfd(to, m, len(data) - r)
                e = a.wait(tag, {smartt.SENT, smartt.FAILED, smartt.ERROR}, T)
                self.assertEqual(e.type, smartt.SENT)
                with b.recv(T) as got:
                    self.assertEqual(got.size, len(data) - r)
                    self.assertTrue(got.data == data[:len(data) - r])

    def test_ring(self):
        a, b, ea, eb = self.pair()
        b.enable_ring(8 << 20, 0, T)
        to = smartt.Addr.parse(BADDR, eb)
        inring = 0
        for i in range(30):
            data = pattern(1 << 20, i)
            tag = a.send_async(to, data)
            with b.recv(T) as m:
                self.assertTrue(m.data == data)
                inring += m.in_ring
            a.wait(tag, {smartt.SENT}, T)
        self.assertGreaterEqual(inring, 20)
        with self.assertRaises(smartt.Error):
            b.enable_ring(8 << 20)

    def test_auto_ring(self):
        """The first 2 MiB message over the socket sets up a ring (4 such messages) by
        itself; later large ones come through it and are copied out (in_ring False, the
        bytes the caller's own), small ones still over the socket; every message arrives
        whole and in order. auto_ring=None keeps a session on the socket."""
        for auto in (smartt.AUTO_RING, None):
            a = smartt.Session(A)
            b = smartt.Session(B, auto_ring=auto)
            self.addCleanup(a.close)
            self.addCleanup(b.close)
            a.bind(0, T)
            to = smartt.Addr.parse(BADDR, b.bind(0, T))
            ring0 = b.counters()["api"]["ring_msgs"]
            for i in range(12):
                data = pattern((2 << 20) if i % 3 else 100, i)
                tag = a.send_async(to, data)
                m = b.recv(T)
                self.assertFalse(m.in_ring)
                self.assertIsInstance(m.data, bytearray)
                self.assertTrue(m.data == data, "message %d" % i)
                m.release()
                a.wait(tag, {smartt.SENT}, T)
            rings = b.counters()["api"]["ring_msgs"] - ring0
            if auto:
                self.assertEqual(b.ring_auto, 8 << 20)
                self.assertGreaterEqual(rings, 6)  # the large ones after the first
            else:
                self.assertEqual(b.ring_auto, 0)
                self.assertEqual(rings, 0)

    def test_refusals(self):
        with smartt.Session(A) as a, smartt.Session(A) as b:
            to = smartt.Addr.parse(BADDR, 1)
            with self.assertRaises(smartt.Error) as cm:
                a.send(to, b"x", T)
            self.assertEqual(cm.exception.daemon_code, 2)
            ep = a.bind(0, T)
            with self.assertRaises(smartt.Error) as cm:
                b.bind(ep, T)
            self.assertEqual(cm.exception.code, smartt.edaemon(3))
            a.send(to, b"x", T)  # the session goes on

    def test_control(self):
        self.assertIn("pid", smartt.get("/v1/status", A))
        with smartt.Session(A) as s:
            self.assertIn("api", s.counters())
            self.assertIn("pid", s.status())
        with self.assertRaises(smartt.Error) as cm:
            smartt.get("/v1/nonesuch", A)
        self.assertEqual(cm.exception.code, smartt.EHTTP)
        old = os.environ.get("SMARTT_SOCKET")
        try:
            os.environ["SMARTT_SOCKET"] = A
            self.assertEqual(smartt.default_socket(), A)
            with smartt.Session():
                pass
            os.environ["SMARTT_SOCKET"] = ""
            self.assertEqual(smartt.default_socket(), "/run/smartt/smarttd.sock")
        finally:
            if old is None:
                os.environ.pop("SMARTT_SOCKET", None)
            else:
                os.environ["SMARTT_SOCKET"] = old
        with self.assertRaises(smartt.Error) as cm:
            smartt.Session("/nonexistent/smartt.sock")
        self.assertEqual(cm.exception.code, smartt.ECONNECT)

    def test_cancel(self):
        a, b, ea, eb = self.pair()
        to = smartt.Addr.parse(BADDR, eb)
        if a.version < 2:
            with self.assertRaises(smartt.Error):
                a.cancel(1)
            return
        tag = a.send_async(to, bytes(4 << 20))
        a.cancel(tag)
        e = a.wait(tag, {smartt.CANCEL_RESULT}, T)
        self.assertIn(e.cancel, (0, 1, 2))
        if e.cancel != smartt.CANCEL_UNKNOWN:
            a.wait(tag, {smartt.SENT, smartt.FAILED}, T)
        a.cancel(987654)
        self.assertEqual(a.wait(987654, {smartt.CANCEL_RESULT}, T).cancel, smartt.CANCEL_UNKNOWN)


UP1 = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/1\r\nConnection: Upgrade\r\n\r\n"
UP2 = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: smartt-msg/2\r\nSmartt-Version: 2\r\n\r\n"
R426 = b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 41\r\n\r\n{\"error\":\"messaging needs smartt-msg/1\"}\n"


def frame(typ, tag, payload, length=None):
    return struct.pack(">B3xII", typ, tag, len(payload) if length is None else length) + payload


class Fake(unittest.TestCase):
    """A fake daemon: each connection gets the next scripted response, then EOF."""

    def serve_after(self, first, then):
        """One connection: first at once, then (after the client wrote a request)."""
        d = tempfile.mkdtemp()
        path = self.path = os.path.join(d, "fake.sock")
        ls = socket.socket(socket.AF_UNIX)
        ls.bind(path)
        ls.listen(1)

        def run():
            c, _ = ls.accept()
            req = b""
            while b"\r\n\r\n" not in req:
                req += c.recv(4096)
            c.sendall(first)
            c.recv(4096)
            c.sendall(then)
            while c.recv(4096):
                pass
            c.close()
            ls.close()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.addCleanup(lambda: (t.join(5), os.unlink(path), os.rmdir(d)))

    def test_ring_bounds(self):
        up = (b"HTTP/1.1 101 x\r\nUpgrade: smartt-msg/1\r\nSmartt-SendFD: 1\r\n"
              b"Smartt-Recv-Ring: 1048576\r\n\r\n")
        for bad in (False, True):
            at = bytes(33) + b"\x64" + struct.pack(">Q", (1 << 20) if bad else 64)
            self.serve_after(up, frame(0x86, 1, struct.pack(">Q", 1 << 20)) + frame(0x87, 5, at))
            with smartt.Session(self.path) as s:
                try:
                    s.enable_ring(1 << 20, 0, 2)
                    with s.recv(2) as m:
                        self.assertFalse(bad)
                        self.assertTrue(m.in_ring)
                        self.assertEqual(m.size, 100)
                except smartt.Error as e:
                    self.assertTrue(bad)
                    self.assertEqual(e.code, smartt.EPROTO)

    def serve(self, responses, keep_open=False):
        d = tempfile.mkdtemp()
        path = self.path = os.path.join(d, "fake.sock")
        ls = socket.socket(socket.AF_UNIX)
        ls.bind(path)
        ls.listen(4)
        self.requests = []

        def run():
            for i, resp in enumerate(responses):
                c, _ = ls.accept()
                req = b""
                while b"\r\n\r\n" not in req:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    req += chunk
                self.requests.append(req)
                c.sendall(resp)
                if keep_open and i == len(responses) - 1:
                    while c.recv(4096):
                        pass
                c.close()
            ls.close()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.addCleanup(lambda: (t.join(5), os.unlink(path), os.rmdir(d)))

    def hostile(self, resp):
        self.serve([resp])
        with self.assertRaises(smartt.Error) as cm:
            with smartt.Session(self.path) as s:
                for _ in range(50):
                    try:
                        m = s.recv(0.02)
                        m.release()
                    except smartt.Timeout:
                        pass
        return cm.exception.code

    def test_v1_fallback(self):
        self.serve([R426, UP1], keep_open=True)
        with smartt.Session(self.path) as s:
            self.assertEqual(s.version, 1)
            # no Smartt-SendFD, no Smartt-Recv-Ring: neither memfds nor a ring
            with self.assertRaises(smartt.Error) as cm:
                s.send_fd_async(smartt.Addr.parse("127.0.0.2:23600", 1), 0, 10)
            self.assertEqual(cm.exception.code, smartt.ENOTSUP)
            with self.assertRaises(smartt.Error) as cm:
                s.enable_ring(1 << 20)
            self.assertEqual(cm.exception.code, smartt.ENOTSUP)
        self.assertIn(b"Upgrade: smartt-msg/2, smartt-msg/1\r\n", self.requests[0])
        self.assertIn(b"Upgrade: smartt-msg/1\r\n", self.requests[1])

    def test_no_common_version(self):
        self.serve([R426, R426])
        with self.assertRaises(smartt.Error) as cm:
            smartt.Session(self.path)
        self.assertEqual(cm.exception.code, smartt.EVERSION)
        self.assertIn("smartt-msg/1", str(cm.exception))

    def test_lying_version(self):
        self.serve([b"HTTP/1.1 101 x\r\nUpgrade: smartt-msg/2\r\nSmartt-Version: 1\r\n\r\n"])
        with self.assertRaises(smartt.Error) as cm:
            smartt.Session(self.path)
        self.assertEqual(cm.exception.code, smartt.EPROTO)

    def test_v2_events(self):
        self.serve([UP2 + frame(0x88, 7, b"") + frame(0x89, 7, b"\x01")], keep_open=True)
        with smartt.Session(self.path) as s:
            self.assertEqual(s.version, 2)
            self.assertEqual(s.wait(7, {smartt.ACCEPTED}, 2).type, smartt.ACCEPTED)
            self.assertEqual(s.wait(7, {smartt.CANCEL_RESULT}, 2).cancel, smartt.CANCEL_IN_FLIGHT)

    def test_last_words(self):
        self.serve([UP1 + frame(0x85, 0, b"\0\x0bidle")])
        with smartt.Session(self.path) as s:
            for _ in range(2):  # the notice, then the session's error: the same code
                with self.assertRaises(smartt.Error) as cm:
                    s.recv(2)
                self.assertEqual(cm.exception.daemon_code, 11)
                self.assertEqual(cm.exception.text, "idle")

    def test_hostile_frames(self):
        recv = bytes(33) + b"\x0a"
        cases = {
            "short frame": (UP1 + b"\x81\0\0", smartt.ECLOSED),
            "unknown type": (UP1 + frame(0x42, 1, b""), smartt.EPROTO),
            "oversize": (UP1 + frame(0x83, 1, b"", (1 << 20) + 1), smartt.EPROTO),
            "data alone": (UP1 + frame(3, 1, b"abc"), smartt.EPROTO),
            "v2 frame on v1": (UP1 + frame(0x88, 1, b""), smartt.EPROTO),
            "short recv": (UP1 + frame(0x84, 1, recv[:10]), smartt.EPROTO),
            "recvat no ring": (UP1 + frame(0x87, 1, bytes(42)), smartt.EPROTO),
            "huge recv": (UP1 + frame(0x84, 1, bytes(25) + b"\x41" + bytes(8)), smartt.EPROTO),
            "too much data": (UP1 + frame(0x84, 1, recv) + frame(3, 1, b"hello world"), smartt.EPROTO),
            "cut message": (UP1 + frame(0x84, 1, recv) + frame(3, 1, b"hell"), smartt.ECLOSED),
            "reserved byte": (UP1 + b"\x81\x01" + frame(0x81, 1, b"\0\0\0\5")[2:], smartt.EPROTO),
            "cancel code 7": (UP2 + frame(0x89, 1, b"\x07"), smartt.EPROTO),
        }
        for name, (resp, want) in cases.items():
            with self.subTest(name):
                self.assertEqual(self.hostile(resp), want)


if __name__ == "__main__":
    unittest.main()
