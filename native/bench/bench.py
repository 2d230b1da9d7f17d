"""One benchmark round of the smartt Python package (as native/bench/bench.c):
bench.py rtt|bw SOCK_A SOCK_B ADDR_B N"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import smartt  # noqa: E402

mode, sa, sb, addr_b, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
bw = mode == "bw"
a, b = smartt.Session(sa), smartt.Session(sb)
a.bind(0, 5)
eb = b.bind(0, 5)
if bw and os.environ.get("BENCH_RING"):
    b.enable_ring(int(os.environ["BENCH_RING"]) << 20, 65536, 5)
to = smartt.Addr.parse(addr_b, eb)
last = [0.0]


def peer():
    for _ in range(n):
        m = b.recv(30)
        if not bw:
            b.send_async(m.sender, m.data)
        m.release()
        while b.poll_outcome() is not None:
            pass
    last[0] = time.monotonic()


th = threading.Thread(target=peer)
buf = bytes(1 << 20 if bw else 64)
th.start()
t0 = time.monotonic()
tags = []
for i in range(n):
    if bw and len(tags) >= 8:
        a.wait(tags.pop(0), {smartt.SENT}, 30)
    tag = a.send_async(to, buf)
    if bw:
        tags.append(tag)
    else:
        a.recv(30).release()
        while a.poll_outcome() is not None:
            pass
for tag in tags:  # drives the last writes
    a.wait(tag, {smartt.SENT}, 30)
th.join()
if bw:
    print("%.1f" % (n * len(buf) / (last[0] - t0) / 1e6))
else:
    print("%.1f" % ((time.monotonic() - t0) / n * 1e6))
a.close()
b.close()
