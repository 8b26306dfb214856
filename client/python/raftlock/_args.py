"""Python arguments as the library's C values.

What would not survive the trip through ctypes is refused here with
InvalidArgument before anything is sent: a NUL character, which would end
a C string early and name another lock, rule or file than the caller's,
and a number out of its C type's range or the header's, which ctypes would
wrap into another (a lock-delay of 4294967.3 s into 4 ms).
"""

import operator

from .errors import Code, error_for


def c_string(value, what):
    """value (str, or bytes as the library gave them; None stays NULL) as
    the bytes of a NUL-terminated C string."""
    if value is None:
        return None
    raw = value if isinstance(value, bytes) else value.encode()
    if b"\0" in raw:
        raise error_for(Code.EINVAL, f"{what} {value!r}: a NUL character cannot be sent")
    return raw


# Bounds of raftlock.h (test_errors reads the header to keep them equal).
TTL_MIN_MS = 1000
TTL_MAX_MS = 600000
LOCK_DELAY_MAX_MS = TTL_MAX_MS
UINT_MAX = 2**32 - 1  # unsigned and uint32_t
UINT64_MAX = 2**64 - 1


def integer(value, what, low, high):
    """An int in low..high; ctypes would wrap one outside its C type."""
    n = operator.index(value)  # a float is a TypeError, as ctypes makes it
    if not low <= n <= high:
        raise error_for(Code.EINVAL, f"{what} must be {low} to {high}, not {value!r}")
    return n


def milliseconds(seconds, what, high_ms, low_ms=0):
    """Seconds as whole milliseconds in low_ms..high_ms; None is 0, the
    library's default. A positive duration is at least 1 ms: 0 means "the
    default" or "none" to the library, never what a caller giving a
    duration meant."""
    if seconds is None:
        return 0
    ms = -1
    if seconds >= 0 and seconds * 1000 <= high_ms:  # NaN and inf fail here
        ms = max(1, int(seconds * 1000)) if seconds > 0 else 0
    if not low_ms <= ms <= high_ms:
        raise error_for(Code.EINVAL, f"{what} must be {low_ms / 1000:g} to "
                        f"{high_ms / 1000:g} s, not {seconds!r}")
    return ms
