"""raftlock.Client: one connection to a cluster (raftlock_client)."""

import atexit
import contextlib
import ctypes
import os
import threading

from . import _native
from ._guard import Guard
from ._args import UINT64_MAX, UINT_MAX, c_string, integer, milliseconds
from .errors import Code, StateError, error_for
from .introspect import acl_rule_from_c, lock_info_from_c, session_info_from_c, status_from_c
from .session import Session

# The client addresses deploy/local-cluster gives a local cluster.
DEFAULT_ENDPOINTS = "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"

# Clients not closed yet. Held strongly: the library's threads may call
# back into a client's sessions until it is closed, so a client is never
# collected while open; those still open when the interpreter exits are
# closed first.
_open_clients = set()


@atexit.register
def _close_all():
    for client in list(_open_clients):
        client.close()


def _pages(fetch, start):
    """The items of every page: fetch(after) gives (items, more, cursor);
    the next page starts after the cursor, the last item's key as the
    library gave it (a name's raw bytes: its decoded text may be another
    name, or none)."""
    after = start
    while True:
        items, more, after = fetch(after)
        yield from items
        if not more or not items:
            return


def _ms(seconds, name):
    """None and 0: the library's default."""
    return milliseconds(seconds, f"open client: {name}", UINT_MAX)


def acl_perms(text):
    """The permission mask of "lock,read" (raftlock_acl_perms_parse)."""
    mask = ctypes.c_uint32()
    rv = _native.acl_perms_parse(c_string(text, "permissions"), ctypes.byref(mask))
    if rv != 0:
        raise error_for(rv, f"permissions '{text}': expected lock, read, admin or all")
    return mask.value


def acl_perms_text(mask):
    """The text of a permission mask (raftlock_acl_perms_format)."""
    buf = ctypes.create_string_buffer(32)
    return _native.acl_perms_format(mask, buf, len(buf)).decode()


class Client:
    """A client of one raftlock cluster; thread-safe.

    endpoints: "host:port" client addresses of any nodes, as a list or a
    comma-separated string. TLS is on when tls_ca is given or tls is true
    (then the system CA store verifies the nodes); cert and key are a client
    certificate (required by client-tls = mutual; a certificate shown is
    the client's identity for the access rules); server_name is the name
    every node's certificate must carry (default: each address's host).
    token is a bearer token for clusters with authentication on.

    The client does not connect until the first request. Close it (or use
    it as a context manager): closing closes its sessions, which releases
    their locks.
    """

    def __init__(self, endpoints, *, tls=False, tls_ca=None, cert=None, key=None,
                 server_name=None, token=None, client_name=None, request_timeout=None,
                 connect_timeout=None):
        if isinstance(endpoints, str):
            endpoints = [e for e in endpoints.split(",") if e]
        addrs = [c_string(e, "endpoint") for e in endpoints]
        if not addrs:
            raise error_for(Code.EINVAL, "open client: no endpoint given")
        arr = (ctypes.c_char_p * len(addrs))(*addrs)
        opts = _native.ClientOptions(
            addresses=arr, n_addresses=len(addrs),
            client_name=c_string(client_name, "client_name"),
            request_timeout_ms=_ms(request_timeout, "request_timeout"),
            connect_timeout_ms=_ms(connect_timeout, "connect_timeout"),
            tls=bool(tls), tls_ca_file=c_string(tls_ca, "tls_ca"),
            tls_cert_file=c_string(cert, "cert"), tls_key_file=c_string(key, "key"),
            tls_server_name=c_string(server_name, "server_name"),
            auth_token=c_string(token, "token"))
        ptr = ctypes.c_void_p()
        msg = ctypes.c_char_p()
        rv = _native.client_open(ctypes.byref(opts), ctypes.byref(ptr), ctypes.byref(msg))
        if rv != 0:
            raise error_for(rv, msg.value.decode(errors="replace") if msg.value else None)
        self._guard = Guard(ptr.value, lambda: StateError(Code.ESTATE, "the client is closed"))
        # seconds (the library's default when not given, transport.c)
        self._request_timeout = request_timeout or 10.0
        self._mu = threading.Lock()
        self._sessions = set()
        self._default_session = None
        self._default_mu = threading.Lock()
        self._closing = False
        self._callback_thread = None  # where a session callback runs now
        _open_clients.add(self)

    @classmethod
    def from_env(cls, **options):
        """A client configured as the raftlock command is: RAFTLOCK_ENDPOINTS
        (default: the local cluster of deploy/local-cluster), RAFTLOCK_CACERT,
        RAFTLOCK_CERT, RAFTLOCK_KEY, RAFTLOCK_SERVER_NAME and
        RAFTLOCK_AUTH_TOKEN; keyword options override them."""
        def env(name):
            return os.environ.get(name) or None
        conf = dict(tls_ca=env("RAFTLOCK_CACERT"), cert=env("RAFTLOCK_CERT"),
                    key=env("RAFTLOCK_KEY"), server_name=env("RAFTLOCK_SERVER_NAME"),
                    token=env("RAFTLOCK_AUTH_TOKEN"))
        conf.update(options)
        return cls(env("RAFTLOCK_ENDPOINTS") or DEFAULT_ENDPOINTS, **conf)

    # -- plumbing for the other modules --------------------------------

    def _message(self):
        """The library's message of this thread's last error on the client
        (raftlock_errmsg: valid until the thread's next call), or None."""
        try:
            with self._guard.use() as ptr:
                msg = _native.errmsg(ptr).decode(errors="replace")
        except StateError:  # closed
            return None
        return None if msg == "no error" else msg

    def _call(self, fn, *args):
        """fn(client pointer, *args) while the client is open; raises its
        error with the library's message."""
        with self._guard.use() as ptr:
            self._check(fn(ptr, *args))

    def _check(self, rv, acquiring=False):
        """Raises the exception of rv, with its message: call right after
        the failed call, in the same thread."""
        if rv != 0:
            raise error_for(rv, self._message(), acquiring)

    def _forget(self, session):
        with self._mu:
            self._sessions.discard(session)

    # -- sessions and locks --------------------------------------------

    def session(self, ttl=10.0, *, on_lost=None, on_event=None, grace=None):
        """Opens a session (a lease kept alive in the background).

        ttl: lease length in seconds. on_lost(session, error) runs once,
        on a library thread, when the session is lost for good; error is a
        SessionLost (expired or closed by the cluster), PermissionDenied or
        Timeout (the grace period passed without an acknowledged keepalive).
        on_event(session, event, error) runs at each state change
        (SessionEvent.JEOPARDY, SAFE, LOST). Callbacks must be short and
        must not close the client. grace: seconds a session in jeopardy is
        renewed before it counts as lost (default: 3 TTLs).
        """
        # Opened and known to the client under one use: a close() under way
        # waits for it, then closes it with the others.
        with self._guard.use():
            s = Session(self, ttl, grace, on_lost, on_event)
            with self._mu:
                self._sessions.add(s)
        return s

    def _default(self):
        """The client's own session for client.lock(), opened on first use
        and again after it was lost."""
        with self._default_mu:
            s = self._default_session
            if s is None or s.lost:
                if s is not None:
                    s.close_quietly()
                s = self.session()
                self._default_session = s
            return s

    @contextlib.contextmanager
    def lock(self, name, timeout=None, **options):
        """`with client.lock("db/migrate") as token:` holds the exclusive
        lock `name` in the client's own session and yields its fencing
        token; raises LockNotAcquired (LockTimeout, LockBusy) or another
        RaftlockError when the lock is not taken. options as Session.lock."""
        with self._default().lock(name, timeout=timeout, **options) as held:
            yield held.token

    # -- reads ----------------------------------------------------------

    def check_token(self, name, token):
        """Whether `token` belongs to a current holder of `name`."""
        current = ctypes.c_bool()
        self._call(_native.check_token, c_string(name, "lock name"),
                   integer(token, "token", 0, UINT64_MAX), ctypes.byref(current))
        return current.value

    def status(self, address=None):
        """One node's own view (`address`: "host:port"; None: the first
        that answers). Works without a quorum."""
        out = ctypes.POINTER(_native.Status)()
        self._call(_native.status_get, c_string(address, "address"), ctypes.byref(out))
        try:
            return status_from_c(out.contents)
        finally:
            _native.status_free(out)

    def lock_info(self, name, stale=False, holders_after=0):
        """Holders and waiters of one lock; NotFound if nobody holds or waits.
        The holders listed are those with a token above holders_after, in
        grant order: while the answer's holders_more, ask again after the
        last token listed."""
        out = ctypes.POINTER(_native.LockInfo)()
        self._call(_native.lock_get_holders, c_string(name, "lock name"),
                   integer(holders_after, "holders_after", 0, UINT64_MAX), stale,
                   ctypes.byref(out))
        try:
            return lock_info_from_c(out.contents)
        finally:
            _native.lock_info_free(out)

    def locks(self, prefix="", stale=False):
        """Every lock whose name starts with prefix, in name order (all pages)."""
        def page(after):
            out = ctypes.POINTER(_native.LockList)()
            self._call(_native.lock_list, c_string(prefix, "prefix"), c_string(after, "cursor"),
                       0, stale, ctypes.byref(out))
            try:
                lst = out.contents
                locks = lst.locks[:lst.n_locks]
                cursor = locks[-1].name if locks else None
                return [lock_info_from_c(li) for li in locks], lst.more, cursor
            finally:
                _native.lock_list_free(out)
        return _pages(page, None)

    def sessions(self, stale=False):
        """Every session of the cluster, by id (all pages)."""
        def page(after):
            out = ctypes.POINTER(_native.SessionList)()
            self._call(_native.session_list, after, 0, stale, ctypes.byref(out))
            try:
                lst = out.contents
                sessions = [session_info_from_c(si) for si in lst.sessions[:lst.n_sessions]]
                return sessions, lst.more, sessions[-1].id if sessions else 0
            finally:
                _native.session_list_free(out)
        return _pages(page, 0)

    # -- access rules (clusters with auth = on) --------------------------

    def acl_set(self, identity, prefix, perms):
        """Creates or replaces the rule of (identity, prefix): perms is
        "lock", "read", "admin", a comma-separated list of them, or "all".
        Needs admin on the prefix (else PermissionDenied)."""
        self._call(_native.acl_set, c_string(identity, "identity"), c_string(prefix, "prefix"),
                   acl_perms(perms))

    def acl_delete(self, identity, prefix):
        """Deletes the rule of (identity, prefix); NotFound if there is none."""
        self._call(_native.acl_delete, c_string(identity, "identity"), c_string(prefix, "prefix"))

    def acl_rules(self, stale=False):
        """The rules on prefixes this identity has admin on, in (identity,
        prefix) order (all pages)."""
        def page(after):
            out = ctypes.POINTER(_native.AclList)()
            self._call(_native.acl_list, c_string(after[0], "cursor"),
                       c_string(after[1], "cursor"), 0, stale, ctypes.byref(out))
            try:
                lst = out.contents
                rules = lst.rules[:lst.n_rules]
                cursor = (rules[-1].identity, rules[-1].prefix) if rules else (None, None)
                return [acl_rule_from_c(r, acl_perms_text) for r in rules], lst.more, cursor
            finally:
                _native.acl_list_free(out)
        return _pages(page, (None, None))

    # -- life -----------------------------------------------------------

    @property
    def closed(self):
        return self._guard.ptr is None

    def close(self):
        """Closes every session (releasing their locks) and the client,
        once the calls of other threads on it are over (a session being
        opened is closed with the others). Must not be called from a
        callback of this client. Idempotent."""
        if self._callback_thread == threading.get_ident():
            raise StateError(Code.ESTATE, "close the client from its own callback")
        with self._mu:
            if self._closing:
                return
            self._closing = True
        ptr = self._guard.close()  # waits for calls and session opens under way
        with self._mu:
            sessions, self._sessions = list(self._sessions), set()
            self._default_session = None
        for s in sessions:
            s.close_quietly()
        _native.client_close(ptr)
        _open_clients.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<raftlock.Client {'closed' if self.closed else 'open'}>"

