"""What a library callback will be given, kept alive until it runs.

The library gets an id as a callback's argument, never a Python object:
the object stays here from before the call is sent until its callback
takes it, so a caller that stopped waiting (a cancelled task, a wait given
up or interrupted, a closed handle) frees nothing a late callback uses. A
call the library refuses never calls back: its object is dropped at once.
"""

import itertools
import threading

_kept = {}  # id -> object of the callback to come
_kept_mu = threading.Lock()
_ids = itertools.count(1)


def send(obj, call, *args):
    """Makes call(*args, id), a library call whose callback gets that id,
    and keeps obj for that callback unless the call is refused (a nonzero
    result: no callback). Returns call's result."""
    op = next(_ids)
    with _kept_mu:
        _kept[op] = obj
    rv = call(*args, op)
    if rv != 0:
        with _kept_mu:
            _kept.pop(op, None)
    return rv


def take(op):
    """In the callback given `op`: the object sent with it, kept no more."""
    with _kept_mu:
        return _kept.pop(op)
