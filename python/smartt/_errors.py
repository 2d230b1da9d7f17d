"""Errors: the same negative codes as libsmartt (smartt.h)."""

EINVAL, ENOMEM, ECONNECT, EIO, ECLOSED, EPROTO, EVERSION, EHTTP = -1, -2, -3, -4, -5, -6, -7, -8
EAGAIN, ETIMEDOUT, ENOTSUP, EFAILED, EBUSY, ESYS = -9, -10, -11, -12, -13, -14
EDAEMON_BASE = 100

_LIB = {
    EINVAL: "invalid argument", ENOMEM: "out of memory",
    ECONNECT: "cannot connect to the daemon's socket", EIO: "socket error",
    ECLOSED: "the daemon closed the session", EPROTO: "the daemon sent malformed data",
    EVERSION: "the daemon speaks no protocol version this library does (smartt-msg/1, smartt-msg/2)",
    EHTTP: "the daemon refused the request", EAGAIN: "nothing ready yet", ETIMEDOUT: "timed out",
    ENOTSUP: "not supported by this daemon", EFAILED: "the message failed",
    EBUSY: "the daemon has no session slot free", ESYS: "a system call failed",
}
_DAEMON = {
    1: "protocol error (the daemon closed the session)", 2: "not bound",
    3: "endpoint already bound", 4: "message too large or empty",
    5: "too many bytes outstanding", 6: "the daemon is shutting down",
    7: "received messages were dropped (receive queue full)",
    8: "the engine refused the message", 9: "bad memfd", 10: "bad destination",
    11: "the daemon closed the session", 12: "receive ring refused",
}


def edaemon(code):
    """The error code of a daemon Error frame with code (1..65535)."""
    return -(EDAEMON_BASE + code)


def strerror(code):
    """Describes an error code."""
    if code in _LIB:
        return _LIB[code]
    if code == 0:
        return "success"
    if code <= -(EDAEMON_BASE + 1):
        return _DAEMON.get(-code - EDAEMON_BASE, "daemon error")
    return "unknown error"


class Error(Exception):
    """A smartt error: .code (negative, as in libsmartt), .text (the daemon's words)."""

    def __init__(self, code, text=""):
        self.code = code
        self.text = text
        msg = strerror(code)
        super().__init__(msg + (": " + text if text else ""))

    @property
    def daemon_code(self):
        """The daemon's Error code (1..), or 0 if the error is not the daemon's."""
        return -self.code - EDAEMON_BASE if self.code <= -(EDAEMON_BASE + 1) else 0


class Timeout(Error, TimeoutError):
    """Nothing came within the timeout."""

    def __init__(self, text=""):
        super().__init__(ETIMEDOUT, text)
