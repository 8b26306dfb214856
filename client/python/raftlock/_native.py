"""ctypes declarations of libraftlock (client/raftlock.h).

This module only finds the shared library and declares its functions and
structures; it holds no state and no policy. Every function the package
calls has its argtypes and restype here, so that a mismatch with the header
is a TypeError in Python rather than a corrupted stack in C; a library of
another version (a function missing, a struct of another size) fails the
import.

Ownership, as the header documents it: strings passed in are copied by the
library; objects returned through an out pointer belong to the caller and
are freed with the matching *_free / *_close function (the wrappers in the
other modules copy what they need into Python objects and free at once).
"""

import ctypes
import ctypes.util
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char_p, c_int, c_size_t, c_uint,
                    c_uint32, c_uint64, c_void_p)

# enum raftlock_kind / raftlock_mode / raftlock_session_event
MUTEX, RWLOCK, SEMAPHORE = 1, 2, 3
EXCLUSIVE, SHARED = 0, 1
SESSION_JEOPARDY, SESSION_SAFE, SESSION_LOST = 1, 2, 3


def _candidates():
    """Where the library may be, in the order the package documents."""
    env = os.environ.get("RAFTLOCK_LIBRARY")
    if env:
        yield env
        return
    found = ctypes.util.find_library("raftlock")
    if found:
        yield found
    # A source checkout: client/python/raftlock/ -> <repo>/build/lib.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    yield os.path.join(repo, "build", "lib", "libraftlock.so")


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("libraftlock not found (set RAFTLOCK_LIBRARY to its path); tried: " +
                      "; ".join(tried))


lib = _load()


class ClientOptions(Structure):
    _fields_ = [
        ("addresses", POINTER(c_char_p)),
        ("n_addresses", c_size_t),
        ("client_name", c_char_p),
        ("request_timeout_ms", c_uint),
        ("connect_timeout_ms", c_uint),
        ("tls", c_bool),
        ("tls_ca_file", c_char_p),
        ("tls_cert_file", c_char_p),
        ("tls_key_file", c_char_p),
        ("tls_server_name", c_char_p),
        ("auth_token", c_char_p),
    ]


# void (*)(raftlock_session *, int reason, void *arg)
SESSION_LOST_CB = CFUNCTYPE(None, c_void_p, c_int, c_void_p)
# void (*)(raftlock_session *, enum raftlock_session_event, int reason, void *arg)
SESSION_EVENT_CB = CFUNCTYPE(None, c_void_p, c_int, c_int, c_void_p)
# void (*)(raftlock_lock *, int status, uint64_t value, void *arg)
LOCK_CB = CFUNCTYPE(None, c_void_p, c_int, c_uint64, c_void_p)


class SessionOptions(Structure):
    _fields_ = [
        ("ttl_ms", c_uint),
        ("on_lost", SESSION_LOST_CB),
        ("on_lost_arg", c_void_p),
        ("grace_ms", c_uint),
        ("on_event", SESSION_EVENT_CB),
        ("on_event_arg", c_void_p),
        # Not offered by this package yet; present so that the struct has
        # the size of the C one (raftlock.h).
        ("on_lock_event", c_void_p),
        ("on_lock_event_arg", c_void_p),
        ("bind_to_connection", c_bool),
        ("bind_grace_ms", c_uint),
    ]


class LockOptions(Structure):
    _fields_ = [
        ("kind", c_int),
        ("limit", c_uint32),
        ("lock_delay_ms", c_uint),
        ("max_hold_ms", c_uint),
        ("revoke_grace_ms", c_uint),
    ]


class Member(Structure):
    _fields_ = [("id", c_uint64), ("raft_address", c_char_p), ("client_address", c_char_p)]


class Status(Structure):
    _fields_ = [
        ("node_id", c_uint64),
        ("role", c_char_p),
        ("ready", c_bool),
        ("term", c_uint64),
        ("commit_index", c_uint64),
        ("applied_index", c_uint64),
        ("last_index", c_uint64),
        ("leader_id", c_uint64),
        ("leader_address", c_char_p),
        ("cluster_time", c_uint64),
        ("next_token", c_uint64),
        ("sessions", c_uint64),
        ("locks", c_uint64),
        ("cluster", c_char_p),
        ("n_members", c_size_t),
        ("members", POINTER(Member)),
        ("cluster_id", c_uint64),
        ("feature_level", c_uint32),
        ("cluster_feature_level", c_uint32),
    ]


class Owner(Structure):
    _fields_ = [("client_name", c_char_p), ("host", c_char_p), ("pid", c_uint32)]


class Holder(Structure):
    _fields_ = [
        ("session", c_uint64),
        ("owner", c_uint64),
        ("mode", c_int),
        ("permits", c_uint32),
        ("count", c_uint32),
        ("token", c_uint64),
        ("granted_index", c_uint64),
        ("granted_time", c_uint64),
        ("who", Owner),
    ]


class Waiter(Structure):
    _fields_ = [
        ("session", c_uint64),
        ("owner", c_uint64),
        ("mode", c_int),
        ("permits", c_uint32),
        ("queued_time", c_uint64),
        ("who", Owner),
    ]


class LockInfo(Structure):
    _fields_ = [
        ("name", c_char_p),
        ("kind", c_int),
        ("limit", c_uint32),
        ("delay_until", c_uint64),
        ("lock_delay_ms", c_uint32),
        ("cluster_time", c_uint64),
        ("n_holders", c_size_t),
        ("holders", POINTER(Holder)),
        ("n_waiters", c_size_t),
        ("waiters", POINTER(Waiter)),
        ("max_hold_ms", c_uint32),
        ("revoke_grace_ms", c_uint32),
        ("holders_total", c_size_t),
        ("waiters_total", c_size_t),
        ("holders_after", c_uint64),
        ("holders_more", c_bool),
    ]


class LockList(Structure):
    _fields_ = [("n_locks", c_size_t), ("locks", POINTER(LockInfo)), ("more", c_bool)]


class SessionInfo(Structure):
    _fields_ = [
        ("id", c_uint64),
        ("ttl_ms", c_uint32),
        ("deadline", c_uint64),
        ("opened_time", c_uint64),
        ("who", Owner),
        ("n_locks", c_size_t),
        ("locks", POINTER(c_char_p)),
        ("locks_total", c_size_t),
    ]


class SessionList(Structure):
    _fields_ = [
        ("n_sessions", c_size_t),
        ("sessions", POINTER(SessionInfo)),
        ("more", c_bool),
        ("cluster_time", c_uint64),
    ]


class AclRule(Structure):
    _fields_ = [("identity", c_char_p), ("prefix", c_char_p), ("perms", c_uint32)]


class AclList(Structure):
    _fields_ = [("n_rules", c_size_t), ("rules", POINTER(AclRule)), ("more", c_bool)]


def _declare(name, restype, *argtypes):
    try:
        fn = getattr(lib, name)
    except AttributeError:
        # a library older than the package: fail at import, saying so,
        # not later with an AttributeError (or by reading past a struct)
        raise ImportError(f"libraftlock at {lib._name} has no {name}: it is older than this "
                          "package (rebuild it, or set RAFTLOCK_LIBRARY to a newer one)"
                          ) from None
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


# The Structures above by the name of the raftlock.h struct each mirrors.
MIRRORS = {
    "raftlock_client_options": ClientOptions,
    "raftlock_session_options": SessionOptions,
    "raftlock_lock_options": LockOptions,
    "raftlock_member": Member,
    "raftlock_status": Status,
    "raftlock_owner": Owner,
    "raftlock_holder": Holder,
    "raftlock_waiter": Waiter,
    "raftlock_lock_info": LockInfo,
    "raftlock_lock_list": LockList,
    "raftlock_session_info": SessionInfo,
    "raftlock_session_list": SessionList,
    "raftlock_acl_rule": AclRule,
    "raftlock_acl_list": AclList,
}


def _check_struct_sizes(struct_size, path, mirrors=MIRRORS):
    """Refuses a library whose structs are not the size of the package's.

    struct_size is the library's raftlock_struct_size (name: bytes -> int),
    path the library's for the message. A struct that grew in the library
    with no new function would otherwise pass _declare, and ctypes would
    read and write past (or short of) the Structure: memory corruption.
    A size of 0: the library does not know the struct (older than the
    package).
    """
    for name, mirror in mirrors.items():
        theirs, ours = struct_size(name.encode()), ctypes.sizeof(mirror)
        if theirs != ours:
            known = " (it does not know the struct)" if theirs == 0 else ""
            raise ImportError(f"libraftlock at {path} has struct {name} of {theirs} bytes{known}, "
                              f"this package's is {ours} bytes: the library and the package are "
                              "of different versions (rebuild the library from the package's "
                              "source, or set RAFTLOCK_LIBRARY to the matching one)")


# Before any other call: a struct of another size corrupts memory.
struct_size = _declare("raftlock_struct_size", c_size_t, c_char_p)
_check_struct_sizes(struct_size, lib._name)

# Opaque objects travel as c_void_p: Python never looks inside them.
strerror = _declare("raftlock_strerror", c_char_p, c_int)
client_open = _declare("raftlock_client_open", c_int, POINTER(ClientOptions), POINTER(c_void_p),
                       POINTER(c_char_p))
client_close = _declare("raftlock_client_close", None, c_void_p)
errmsg = _declare("raftlock_errmsg", c_char_p, c_void_p)

session_open = _declare("raftlock_session_open", c_int, c_void_p, POINTER(SessionOptions),
                        POINTER(c_void_p))
session_close = _declare("raftlock_session_close", c_int, c_void_p)
session_id = _declare("raftlock_session_id", c_uint64, c_void_p)
session_valid_until = _declare("raftlock_session_valid_until", c_uint64, c_void_p)
session_valid = _declare("raftlock_session_valid", c_bool, c_void_p)
now_ms = _declare("raftlock_now_ms", c_uint64)

lock_new = _declare("raftlock_lock_new", c_int, c_void_p, c_char_p, POINTER(LockOptions),
                    POINTER(c_void_p))
lock_try = _declare("raftlock_lock_try", c_int, c_void_p, POINTER(c_uint64))
lock_acquire = _declare("raftlock_lock_acquire", c_int, c_void_p, c_int, c_uint32, c_int,
                        POINTER(c_uint64))
lock_release = _declare("raftlock_lock_release", c_int, c_void_p, POINTER(c_uint32))
lock_token = _declare("raftlock_lock_token", c_uint64, c_void_p)
lock_try_async = _declare("raftlock_lock_try_async", c_int, c_void_p, LOCK_CB, c_void_p)
lock_acquire_async = _declare("raftlock_lock_acquire_async", c_int, c_void_p, c_int, c_uint32,
                              c_int, LOCK_CB, c_void_p)
lock_release_async = _declare("raftlock_lock_release_async", c_int, c_void_p, LOCK_CB, c_void_p)
lock_free = _declare("raftlock_lock_free", None, c_void_p)
check_token = _declare("raftlock_check_token", c_int, c_void_p, c_char_p, c_uint64,
                       POINTER(c_bool))

status_get = _declare("raftlock_status_get", c_int, c_void_p, c_char_p, POINTER(POINTER(Status)))
status_free = _declare("raftlock_status_free", None, POINTER(Status))
lock_get = _declare("raftlock_lock_get", c_int, c_void_p, c_char_p, c_bool,
                    POINTER(POINTER(LockInfo)))
lock_get_holders = _declare("raftlock_lock_get_holders", c_int, c_void_p, c_char_p, c_uint64,
                            c_bool, POINTER(POINTER(LockInfo)))
lock_info_free = _declare("raftlock_lock_info_free", None, POINTER(LockInfo))
lock_list = _declare("raftlock_lock_list", c_int, c_void_p, c_char_p, c_char_p, c_uint32, c_bool,
                     POINTER(POINTER(LockList)))
lock_list_free = _declare("raftlock_lock_list_free", None, POINTER(LockList))
session_list = _declare("raftlock_session_list", c_int, c_void_p, c_uint64, c_uint32, c_bool,
                        POINTER(POINTER(SessionList)))
session_list_free = _declare("raftlock_session_list_free", None, POINTER(SessionList))

acl_set = _declare("raftlock_acl_set", c_int, c_void_p, c_char_p, c_char_p, c_uint32)
acl_delete = _declare("raftlock_acl_delete", c_int, c_void_p, c_char_p, c_char_p)
acl_list = _declare("raftlock_acl_list", c_int, c_void_p, c_char_p, c_char_p, c_uint32, c_bool,
                    POINTER(POINTER(AclList)))
acl_list_free = _declare("raftlock_acl_list_free", None, POINTER(AclList))
acl_perms_parse = _declare("raftlock_acl_perms_parse", c_int, c_char_p, POINTER(c_uint32))
# buf: a caller's buffer of at least 16 bytes; returns buf
acl_perms_format = _declare("raftlock_acl_perms_format", c_char_p, c_uint32, c_char_p, c_size_t)
