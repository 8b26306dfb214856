"""The error model without a cluster: the codes are the header's, every
code has its exception class, and bad input fails with a clear error
before anything is sent."""

import ctypes
import os
import re
import unittest

import raftlock
from raftlock import _args
from raftlock.errors import _CLASSES

from cluster import REPO


def header_errors():
    """(name, value, message) of the RAFTLOCK_ERRORS X-macro of raftlock.h."""
    with open(os.path.join(REPO, "client", "raftlock.h")) as f:
        text = f.read()
    return [(m[0], int(m[1]), m[2])
            for m in re.findall(r'X\((E[A-Z]+), (-\d+), "([^"]*)"\)', text)]


class ErrorCodes(unittest.TestCase):
    def test_codes_are_the_headers(self):
        codes = header_errors()
        self.assertGreaterEqual(len(codes), 26)
        self.assertEqual({n: v for n, v, _ in codes},
                         {c.name: c.value for c in raftlock.Code})
        for name, value, message in codes:
            self.assertEqual(raftlock.strerror(value), message)

    def test_every_code_has_its_class_and_keeps_its_message(self):
        for code in raftlock.Code:
            self.assertIn(code, _CLASSES, code.name)
            e = raftlock.error_for(code, f"context: {code.name}")
            self.assertIsInstance(e, raftlock.RaftlockError)
            self.assertIs(e.code, code)
            self.assertEqual(e.name, code.name)
            self.assertEqual(str(e), f"context: {code.name}")
        self.assertEqual(str(raftlock.error_for(raftlock.Code.EBUSY)),
                         "the lock is held by another owner")

    def test_the_hierarchy(self):
        E = raftlock.error_for
        self.assertIsInstance(E(-8), raftlock.LockBusy)
        self.assertIsInstance(E(-8), raftlock.LockNotAcquired)
        self.assertIsInstance(E(-3), raftlock.Timeout)
        self.assertIsInstance(E(-3), TimeoutError)
        self.assertNotIsInstance(E(-3), raftlock.LockNotAcquired)
        timed_out = E(-3, acquiring=True)
        self.assertIsInstance(timed_out, raftlock.LockTimeout)
        self.assertIsInstance(timed_out, raftlock.LockNotAcquired)
        self.assertIsInstance(timed_out, raftlock.Timeout)
        self.assertIsInstance(E(-7), raftlock.SessionLost)
        # an acquire revoked before it returned, or not answered, holds
        # nothing: `except LockNotAcquired` catches it, as does the old type
        revoked, unknown = E(-9, acquiring=True), E(-14, acquiring=True)
        self.assertIsInstance(revoked, raftlock.LockNotAcquired)
        self.assertIsInstance(revoked, raftlock.NotHolder)
        self.assertIsInstance(revoked, raftlock.LockRevoked)
        self.assertIsInstance(unknown, raftlock.LockNotAcquired)
        self.assertIsInstance(unknown, raftlock.OutcomeUnknown)
        # out of memory, an acquire holds nothing either
        no_memory = E(-2, acquiring=True)
        self.assertIsInstance(no_memory, raftlock.AcquireOutOfMemory)
        self.assertIsInstance(no_memory, raftlock.LockNotAcquired)
        self.assertIsInstance(no_memory, raftlock.InternalError)
        self.assertNotIsInstance(E(-2), raftlock.LockNotAcquired)
        self.assertNotIsInstance(E(-9), raftlock.LockNotAcquired)  # a release's
        self.assertNotIsInstance(E(-14), raftlock.LockNotAcquired)
        self.assertIsInstance(E(-1), ValueError)
        self.assertIsInstance(E(-25), PermissionError)
        self.assertIsInstance(E(-4), ConnectionError)
        self.assertIsInstance(E(-16), LookupError)
        unknown = E(-999)
        self.assertIs(type(unknown), raftlock.RaftlockError)
        self.assertEqual(str(unknown), "unknown error")


class Library(unittest.TestCase):
    def test_a_library_without_a_function_is_refused_at_import(self):
        from raftlock import _native
        with self.assertRaises(ImportError) as e:
            _native._declare("raftlock_no_such_function", None)
        self.assertIn("raftlock_no_such_function", str(e.exception))
        self.assertIn("older than this package", str(e.exception))

    def test_a_library_whose_struct_grew_is_refused_at_import(self):
        from raftlock import _native

        def grown(name):  # a library whose lock_info gained a field
            size = _native.struct_size(name)
            return size + 8 if name == b"raftlock_lock_info" else size

        ours = ctypes.sizeof(_native.LockInfo)
        with self.assertRaises(ImportError) as e:
            _native._check_struct_sizes(grown, "/stand-in/libraftlock.so")
        message = str(e.exception)
        self.assertIn("struct raftlock_lock_info", message)
        self.assertIn(f"of {ours + 8} bytes", message)
        self.assertIn(f"is {ours} bytes", message)
        self.assertIn("/stand-in/libraftlock.so", message)
        self.assertIn("different versions", message)

    def test_a_library_that_does_not_know_a_struct_is_refused(self):
        from raftlock import _native

        def older(name):
            return 0 if name == b"raftlock_acl_list" else _native.struct_size(name)

        with self.assertRaises(ImportError) as e:
            _native._check_struct_sizes(older, "/stand-in/libraftlock.so")
        self.assertIn("struct raftlock_acl_list of 0 bytes", str(e.exception))
        self.assertIn("does not know", str(e.exception))

    def test_the_library_of_this_build_passes(self):
        from raftlock import _native
        _native._check_struct_sizes(_native.struct_size, _native.lib._name)
        for name, mirror in _native.MIRRORS.items():
            self.assertEqual(_native.struct_size(name.encode()), ctypes.sizeof(mirror), name)

    def test_every_structure_is_checked(self):
        # a Structure added to _native without its entry would go unchecked
        from raftlock import _native
        structures = {v for v in vars(_native).values()
                      if isinstance(v, type) and issubclass(v, ctypes.Structure)
                      and v is not ctypes.Structure}
        self.assertEqual(structures, set(_native.MIRRORS.values()))
        with open(os.path.join(REPO, "client", "raftlock.h")) as f:
            defined = set(re.findall(r"^struct (raftlock_\w+) \{", f.read(), re.M))
        self.assertLessEqual(set(_native.MIRRORS), defined)


class BadInput(unittest.TestCase):
    def test_a_client_needs_an_address_that_parses(self):
        with self.assertRaises(raftlock.InvalidArgument):
            raftlock.Client([])
        with self.assertRaises(raftlock.InvalidArgument) as cm:
            raftlock.Client("no-port-here")
        self.assertEqual(cm.exception.code, raftlock.Code.EINVAL)
        self.assertIn("no-port-here", str(cm.exception))

    def test_a_nul_is_refused_not_cut(self):
        # c_char_p would end each string at its NUL: another address, file
        # or name than the caller's.
        for options in ({"endpoints": "127.0.0.1:1\0garbage"},
                        {"client_name": "app\0x"}, {"tls_ca": "/etc/ca.pem\0.bak"},
                        {"cert": "c\0"}, {"key": "k\0"}, {"server_name": "db\0evil"},
                        {"token": "secret\0"}):
            with self.subTest(options):
                with self.assertRaises(raftlock.InvalidArgument) as cm:
                    raftlock.Client(**{"endpoints": "127.0.0.1:1", **options})
                self.assertIn("NUL", str(cm.exception))
        with raftlock.Client("127.0.0.1:1", request_timeout=0.3, connect_timeout=0.1) as c:
            for call in (lambda: c.check_token("a\0b", 1), lambda: c.lock_info("a\0b"),
                         lambda: list(c.locks("a\0b")), lambda: c.status("127.0.0.1:1\0"),
                         lambda: c.acl_set("id\0x", "p/", "lock"),
                         lambda: c.acl_set("id", "p/\0x", "lock"),
                         lambda: c.acl_set("id", "p/", "lock\0admin"),
                         lambda: c.acl_delete("id\0x", "p/"),
                         lambda: c.acl_delete("id", "p/\0x")):
                with self.assertRaises(raftlock.InvalidArgument) as cm:
                    call()
                self.assertEqual(cm.exception.code, raftlock.Code.EINVAL)
                self.assertIn("NUL", str(cm.exception))

    def test_numbers_that_would_wrap_are_refused(self):
        for options in ({"request_timeout": 4294967.3}, {"connect_timeout": 2**40},
                        {"request_timeout": -0.0001}, {"connect_timeout": float("nan")},
                        {"request_timeout": float("inf")}):
            with self.subTest(options), self.assertRaises(raftlock.InvalidArgument):
                raftlock.Client("127.0.0.1:1", **options)
        with raftlock.Client("127.0.0.1:1", request_timeout=0.3, connect_timeout=0.1) as c:
            for token in (-1, 2**64):
                with self.assertRaises(raftlock.InvalidArgument) as cm:
                    c.check_token("x", token)
                self.assertIn("token must be 0 to", str(cm.exception))
        self.assertEqual(_args.milliseconds(0.0004, "d", 1000), 1)  # not 0, "the default"
        self.assertEqual(_args.milliseconds(None, "d", 1000), 0)

    def test_bounds_are_the_headers(self):
        with open(os.path.join(REPO, "client", "raftlock.h")) as f:
            text = f.read()
        defines = dict(re.findall(r"#define RAFTLOCK_(\w+) (\d+)\n", text))
        self.assertEqual(_args.TTL_MIN_MS, int(defines["TTL_MIN_MS"]))
        self.assertEqual(_args.TTL_MAX_MS, int(defines["TTL_MAX_MS"]))
        self.assertIn("#define RAFTLOCK_LOCK_DELAY_MAX_MS RAFTLOCK_TTL_MAX_MS\n", text)

    def test_tls_files_that_cannot_be_read(self):
        with self.assertRaises(raftlock.ConfigError) as cm:
            raftlock.Client("127.0.0.1:1", tls_ca="/nonexistent/ca.pem")
        self.assertIn("/nonexistent/ca.pem", str(cm.exception))
        with self.assertRaises(raftlock.InvalidArgument):
            raftlock.Client("127.0.0.1:1", cert="/nonexistent/c.pem")  # TLS off

    def test_nothing_to_reach(self):
        with raftlock.Client("127.0.0.1:1", request_timeout=0.3, connect_timeout=0.1) as c:
            with self.assertRaises((raftlock.ConnectionFailed, raftlock.Timeout)):
                c.session(ttl=2)
            with self.assertRaises(raftlock.RaftlockError):
                c.status()
        with self.assertRaises(raftlock.StateError):
            c.status()  # closed

    def test_bad_timeouts(self):
        with self.assertRaises(raftlock.InvalidArgument):
            raftlock.lock.timeout_ms(-1)
        self.assertEqual(raftlock.lock.timeout_ms(None), -1)
        self.assertEqual(raftlock.lock.timeout_ms(0), 0)
        self.assertEqual(raftlock.lock.timeout_ms(0.0001), 1)
        self.assertEqual(raftlock.lock.timeout_ms(1e9), 2**31 - 1)


if __name__ == "__main__":
    unittest.main()
