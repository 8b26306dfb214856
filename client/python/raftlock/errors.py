"""The exceptions of the raftlock package, mapped from RAFTLOCK_E* codes.

Every failed library call raises a RaftlockError subclass carrying the code
(`.code`, a Code member), its name (`.name`, "EBUSY") and the library's
message with context (`str(e)`, from raftlock_errmsg: "acquire 'db/migrate':
the lock is held by another owner").

A lock that was not taken raises LockNotAcquired: LockBusy (held by another
owner, for a try-lock), LockTimeout (not granted within the timeout; also
a Timeout), Deadlock, AcquireRevoked (granted but revoked before the call
returned; also a LockRevoked and a NotHolder), AcquireOutcomeUnknown (not
answered in time; also an OutcomeUnknown) or AcquireOutOfMemory (the
library ran out of memory; also an InternalError). Any other exception
from an acquire means the same for the caller: it does not hold the lock.
"""

import enum

from . import _native


class Code(enum.IntEnum):
    """The error codes of raftlock.h (numbers are part of the protocol)."""
    EINVAL = -1
    ENOMEM = -2
    ETIMEDOUT = -3
    ECONNECTION = -4
    ENOTLEADER = -5
    EUNAVAILABLE = -6
    ESESSION = -7
    EBUSY = -8
    ENOTHOLDER = -9
    ESTALESEQ = -10
    EPROTO = -11
    ETOOBIG = -12
    ELIMIT = -13
    EUNKNOWN = -14
    ECANCELED = -15
    ENOTFOUND = -16
    EKIND = -17
    ESHUTDOWN = -18
    EINTERNAL = -19
    ESTATE = -20
    EIO = -21
    ECONFIG = -22
    EDATA = -23
    EOVERLOAD = -24
    EPERM = -25
    ETLS = -26
    ENOSPC = -27
    EDEADLK = -28


class RaftlockError(Exception):
    """A libraftlock call failed; .code is the RAFTLOCK_E* code."""

    def __init__(self, code, message=None):
        self.code = Code(code) if code in Code._value2member_map_ else code
        self.name = self.code.name if isinstance(self.code, Code) else str(code)
        super().__init__(message or strerror(code))


class InvalidArgument(RaftlockError, ValueError):
    """EINVAL, ETOOBIG: bad input; nothing was done."""


class ConfigError(RaftlockError):
    """ECONFIG: a TLS file that cannot be read or used."""


class Timeout(RaftlockError, TimeoutError):
    """ETIMEDOUT: the call did not finish in time."""


class ConnectionFailed(RaftlockError, ConnectionError):
    """ECONNECTION: no node could be reached (nothing was sent); ENOTLEADER:
    the node answered that it is not the leader."""


class Unavailable(RaftlockError):
    """EUNAVAILABLE, ESHUTDOWN, EOVERLOAD: the cluster cannot serve now."""


class DiskFull(RaftlockError):
    """ENOSPC: a node's disk is full; the request was not executed (the
    library retried it until the call's deadline)."""


class TLSError(RaftlockError, ConnectionError):
    """ETLS: every node refused the TLS handshake."""


class PermissionDenied(RaftlockError, PermissionError):
    """EPERM: the identity may not do this (authentication, ACLs, secret)."""


class SessionLost(RaftlockError):
    """ESESSION: the session has expired or was closed: it holds nothing."""


class Canceled(RaftlockError):
    """ECANCELED: the session or client is closing."""


class OutcomeUnknown(RaftlockError):
    """EUNKNOWN: sent, not answered in time. For an acquire the caller does
    not hold the lock (a late grant is released by the library)."""


class NotHolder(RaftlockError):
    """ENOTHOLDER: a release by a handle that holds nothing."""


class LockRevoked(NotHolder):
    """ENOTHOLDER of a grant the caller had not released: the cluster
    revoked it (raftlock revoke, the lock's maximum hold time) and its
    token is no longer current. Raised by release() and at the end of a
    `with` block, which then ran without the lock for part of its time."""


class NotFound(RaftlockError, LookupError):
    """ENOTFOUND: no such lock or session."""


class KindMismatch(RaftlockError):
    """EKIND: the lock exists with another kind or limit."""


class LimitReached(RaftlockError):
    """ELIMIT: a server quota, or the per-address connection limit."""


class StateError(RaftlockError):
    """ESTATE: the call does not fit the present state: an earlier request
    of the handle is still being sent, the handle or session is closed, or
    the node that answered is a build older than the request (upgrade every
    node; the message says which)."""


class ProtocolError(RaftlockError):
    """EPROTO, ESTALESEQ: the cluster and the library disagree."""


class InternalError(RaftlockError):
    """ENOMEM, EINTERNAL, EIO, EDATA: a local or server failure."""


class LockNotAcquired(RaftlockError):
    """The lock was not taken: the caller holds nothing new."""


class LockBusy(LockNotAcquired):
    """EBUSY: held by another owner (a try-lock does not wait)."""


class LockTimeout(LockNotAcquired, Timeout):
    """ETIMEDOUT of an acquire: not granted in time, no longer queued."""


class Deadlock(LockNotAcquired):
    """EDEADLK: the wait would close a cycle of sessions waiting on each
    other; nothing was queued. Release what the session holds, then retry."""


class AcquireRevoked(LockNotAcquired, LockRevoked):
    """ENOTHOLDER of an acquire: the lock was granted, but the grant was
    revoked before the call could return it; the handle holds nothing."""


class AcquireOutcomeUnknown(LockNotAcquired, OutcomeUnknown):
    """EUNKNOWN of an acquire: not answered in time; the handle does not
    hold the lock (the library releases a grant that comes later)."""


class AcquireOutOfMemory(LockNotAcquired, InternalError):
    """ENOMEM of an acquire: the handle does not hold the lock. Nothing was
    sent, or it was sent and not answered in time (as for
    AcquireOutcomeUnknown) but the library had no memory to release a
    grant that comes later: that grant then stays held until the
    session ends."""


_CLASSES = {
    Code.EINVAL: InvalidArgument,
    Code.ETOOBIG: InvalidArgument,
    Code.ECONFIG: ConfigError,
    Code.ETIMEDOUT: Timeout,
    Code.ECONNECTION: ConnectionFailed,
    Code.ENOTLEADER: ConnectionFailed,
    Code.EUNAVAILABLE: Unavailable,
    Code.ESHUTDOWN: Unavailable,
    Code.EOVERLOAD: Unavailable,
    Code.ETLS: TLSError,
    Code.ENOSPC: DiskFull,
    Code.EDEADLK: Deadlock,
    Code.EPERM: PermissionDenied,
    Code.ESESSION: SessionLost,
    Code.ECANCELED: Canceled,
    Code.EUNKNOWN: OutcomeUnknown,
    Code.ENOTHOLDER: NotHolder,
    Code.ENOTFOUND: NotFound,
    Code.EKIND: KindMismatch,
    Code.ELIMIT: LimitReached,
    Code.ESTATE: StateError,
    Code.EPROTO: ProtocolError,
    Code.ESTALESEQ: ProtocolError,
    Code.ENOMEM: InternalError,
    Code.EINTERNAL: InternalError,
    Code.EIO: InternalError,
    Code.EDATA: InternalError,
    Code.EBUSY: LockBusy,
}

# An acquire that ran out of time, was revoked before it returned, was
# not answered or ran out of memory did not take the lock: say so in the
# type.
_ACQUIRE_CLASSES = {**_CLASSES, Code.ETIMEDOUT: LockTimeout, Code.ENOTHOLDER: AcquireRevoked,
                    Code.EUNKNOWN: AcquireOutcomeUnknown, Code.ENOMEM: AcquireOutOfMemory}


def strerror(code):
    """The library's static description of a code (raftlock_strerror)."""
    return _native.strerror(code).decode()


def message_in_callback(status, message_of_failure):
    """In a library callback: the message of a failed status, read with
    message_of_failure() before the callback returns (the library's
    message is its thread's until that thread's next failure); None on
    success, or when it cannot be read (the caller must get its outcome
    all the same)."""
    if status == 0:
        return None
    try:
        return message_of_failure()
    except Exception:  # noqa: BLE001 - the outcome matters more than its text
        return None


def error_for(code, message=None, acquiring=False):
    """The exception for a negative RAFTLOCK_E* code; message defaults to
    raftlock_strerror's. With acquiring, ETIMEDOUT, ENOTHOLDER, EUNKNOWN and
    ENOMEM are LockNotAcquired too (LockTimeout, AcquireRevoked,
    AcquireOutcomeUnknown, AcquireOutOfMemory)."""
    table = _ACQUIRE_CLASSES if acquiring else _CLASSES
    cls = table.get(code, RaftlockError)
    return cls(code, message)
