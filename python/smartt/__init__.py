"""smartt: the Python client of the smarttd API (standard library only; docs/python.md).

    import smartt
    with smartt.Session() as s:          # $SMARTT_SOCKET or /run/smartt/smarttd.sock
        ep = s.bind()
        s.send(smartt.Addr.parse("10.0.0.2:23600", 7), b"hello")
        with s.recv(timeout=5) as m:
            print(m.sender, bytes(m.data))
"""
from ._errors import (EAGAIN, EBUSY, ECLOSED, ECONNECT, EDAEMON_BASE, EFAILED, EHTTP, EINVAL,
                      EIO, ENOMEM, ENOTSUP, EPROTO, ESYS, ETIMEDOUT, EVERSION, Error, Timeout,
                      edaemon, strerror)
from ._session import (ACCEPTED, AUTO_RING, BOUND, CANCEL_IN_FLIGHT, CANCEL_RESULT, CANCEL_UNKNOWN,
                       CANCELLED, DEFAULT_SOCKET, ERROR, FAILED, HEADROOM, MAX_PAYLOAD, RECV,
                       RING_OK, SENT, Addr, Event, Memfd, Session, default_socket, get)

__version__ = "0.1.0"

__all__ = [
    "Session", "Addr", "Event", "Memfd", "Error", "Timeout", "get", "default_socket",
    "strerror", "edaemon", "BOUND", "SENT", "FAILED", "ACCEPTED", "RECV", "ERROR", "RING_OK",
    "CANCEL_RESULT", "CANCELLED", "CANCEL_IN_FLIGHT", "CANCEL_UNKNOWN", "DEFAULT_SOCKET",
    "HEADROOM", "MAX_PAYLOAD", "EINVAL", "ENOMEM", "ECONNECT", "EIO", "ECLOSED", "EPROTO",
    "EVERSION", "EHTTP", "EAGAIN", "ETIMEDOUT", "ENOTSUP", "EFAILED", "EBUSY", "ESYS",
    "EDAEMON_BASE", "AUTO_RING",
]
