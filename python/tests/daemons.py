"""Two smarttd daemons on 127.0.0.1 and 127.0.0.2 for tests (the binary from $SMARTTD or
build/native/bin/smarttd, built by scripts/test-native), each with its own API socket
in a temporary directory and a free UDP port. Usable as a context manager, and as a
command wrapper: `python3 python/tests/daemons.py CMD ARGS...` runs CMD with
SMARTT_A_SOCK, SMARTT_B_SOCK, SMARTT_A_ADDR and SMARTT_B_ADDR set."""
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def smarttd_path():
    return os.environ.get("SMARTTD") or os.path.join(ROOT, "build", "native", "bin", "smarttd")


class Daemons:
    """Starts two daemons; .socks and .addrs list their API sockets and HOST:PORTs."""

    def __init__(self, extra_yaml=""):
        self.extra = extra_yaml
        self.procs = []

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="smartt-native-")
        for attempt in range(20):
            port = random.randint(20000, 59000)
            try:
                self._start(port)
                return self
            except RuntimeError:
                self.stop()
                if attempt == 19:
                    raise
        return self

    def _start(self, port):
        self.socks, self.addrs = [], []
        for i in (1, 2):
            sock = os.path.join(self.dir, "d%d.sock" % i)
            cfg = os.path.join(self.dir, "d%d.yaml" % i)
            with open(cfg, "w") as f:
                f.write("listen: 127.0.0.%d:%d\nlog_level: warn\nmetrics: \"\"\n"
                        "api:\n  socket: %s\n%s" % (i, port, sock, self.extra))
            log = open(os.path.join(self.dir, "d%d.log" % i), "w")
            p = subprocess.Popen([smarttd_path(), "-config", cfg], stdout=log, stderr=log)
            self.procs.append(p)
            self.socks.append(sock)
            self.addrs.append("127.0.0.%d:%d" % (i, port))
        deadline = time.time() + 15
        for p, sock in zip(self.procs, self.socks):
            while not self._up(sock):
                if p.poll() is not None or time.time() > deadline:
                    raise RuntimeError("smarttd did not start: " + self.log())
                time.sleep(0.02)

    @staticmethod
    def _up(path):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def log(self):
        out = ""
        for i in (1, 2):
            try:
                with open(os.path.join(self.dir, "d%d.log" % i)) as f:
                    out += f.read()
            except OSError:
                pass
        return out

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []

    def __exit__(self, *exc):
        self.stop()
        subprocess.call(["rm", "-rf", self.dir])

    def env(self):
        e = dict(os.environ)
        e.update(SMARTT_A_SOCK=self.socks[0], SMARTT_B_SOCK=self.socks[1],
                 SMARTT_A_ADDR=self.addrs[0], SMARTT_B_ADDR=self.addrs[1])
        return e


if __name__ == "__main__":
    with Daemons() as d:
        sys.exit(subprocess.call(sys.argv[1:], env=d.env()))
