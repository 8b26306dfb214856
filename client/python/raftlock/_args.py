"""Python arguments as the library's C values.

What would not survive the trip through ctypes is refused here with
InvalidArgument before anything is sent: a NUL character, which would end
a C string early and name another lock, rule or file than the caller's.
"""

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
