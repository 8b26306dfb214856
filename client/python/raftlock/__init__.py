"""raftlock: Python client of the raftlock lock service, on libraftlock.

    import raftlock

    with raftlock.Client("127.0.0.1:7001,127.0.0.1:7002") as client:
        with client.lock("db/migrate", timeout=10) as token:
            migrate(fencing_token=token)

        with client.session(ttl=10, on_lost=lambda s, err: stop_work()) as session:
            with session.read_lock("config", timeout=5) as lock:
                read_config(lock.token)

The package loads libraftlock.so through ctypes: from RAFTLOCK_LIBRARY (a
path) when set, else the system's library search path, else a source
checkout's build/lib. See README.md, "Python client".
"""

from . import _native
from .client import Client
from .errors import (AcquireOutcomeUnknown, AcquireOutOfMemory, AcquireRevoked, Canceled, Code,
                     ConfigError, ConnectionFailed, Deadlock, DiskFull, InternalError,
                     InvalidArgument, KindMismatch, LimitReached, LockBusy, LockNotAcquired,
                     LockRevoked, LockTimeout, NotFound, NotHolder, OutcomeUnknown,
                     PermissionDenied, ProtocolError, RaftlockError, SessionLost, StateError,
                     Timeout, TLSError, Unavailable, error_for, strerror)
from .lock import Lock
from .session import Session, SessionEvent
from .aio import AsyncLock

__version__ = "0.1.0"

EXCLUSIVE = _native.EXCLUSIVE
SHARED = _native.SHARED


def now_ms():
    """CLOCK_BOOTTIME in milliseconds: the clock of Session.valid_until_ms."""
    return _native.now_ms()


__all__ = [
    "Client", "Session", "SessionEvent", "Lock", "AsyncLock", "EXCLUSIVE", "SHARED", "now_ms",
    "Code", "strerror", "error_for", "RaftlockError", "InvalidArgument", "ConfigError",
    "Timeout", "ConnectionFailed", "Unavailable", "DiskFull", "TLSError", "PermissionDenied", "SessionLost",
    "Canceled", "OutcomeUnknown", "NotHolder", "NotFound", "KindMismatch", "LimitReached",
    "StateError", "ProtocolError", "InternalError", "LockNotAcquired", "LockBusy",
    "LockTimeout", "LockRevoked", "Deadlock", "AcquireRevoked", "AcquireOutcomeUnknown",
    "AcquireOutOfMemory",
]
