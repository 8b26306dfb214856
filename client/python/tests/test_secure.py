"""TLS and bearer tokens through the Python options, on a real 3-node
cluster with client-tls = server and auth = on: the CA, the server name
and a token take a lock; a client certificate is the client's identity;
a certificate of another CA, another server name or an unknown token are
refused with the library's reason; access rules set, listed and deleted."""

import asyncio
import hashlib
import os
import shutil
import subprocess
import tempfile
import unittest

import raftlock

from cluster import REPO, start_for_module

ROOT_TOKEN = "py-root-token-0123456789"
cluster = None
certs = None


def setUpModule():
    global cluster, certs
    scratch = tempfile.mkdtemp(prefix="raftlock-py-certs-")
    unittest.addModuleCleanup(shutil.rmtree, scratch, True)
    certs = os.path.join(scratch, "certs")
    make_certs = os.path.join(REPO, "deploy", "make-certs")
    subprocess.run([make_certs, certs, "--nodes", "3", "--client", "alice"], check=True,
                   capture_output=True)
    subprocess.run([make_certs, os.path.join(scratch, "other"), "--nodes", "0", "--client",
                    "mallory"], check=True, capture_output=True)
    tokens = os.path.join(scratch, "tokens")
    with open(tokens, "w") as f:
        f.write(f"root {hashlib.sha256(ROOT_TOKEN.encode()).hexdigest()}\n")
    c = os.path.join(certs, "")
    cluster = start_for_module(
        extra_args=["--client-tls", "server", "--client-tls-cert", c + "node-{id}.pem",
                    "--client-tls-key", c + "node-{id}.key", "--client-tls-ca", c + "ca.pem",
                    "--auth", "on", "--auth-tokens", tokens, "--auth-admin", "root"],
        client_options=dict(tls_ca=c + "ca.pem", token=ROOT_TOKEN))


def client(**overrides):
    opts = dict(cluster.client_options, request_timeout=3, connect_timeout=1)
    opts.update(overrides)
    return raftlock.Client(cluster.endpoints, **opts)


class Secure(unittest.TestCase):
    def test_the_ca_and_a_token_take_a_lock(self):
        with client(server_name="localhost") as c:
            with c.lock("secure/a", timeout=5) as token:
                self.assertTrue(c.check_token("secure/a", token))

    def test_a_client_certificate_names_the_client(self):
        alice = os.path.join(certs, "client-alice")
        with client(cert=alice + ".pem", key=alice + ".key") as c:
            with self.assertRaises(raftlock.PermissionDenied) as cm:
                with c.lock("secure/b", timeout=5):
                    self.fail("alice has no rule")
        self.assertIn("identity 'alice' has no 'lock' on 'secure/b'", str(cm.exception))

    def test_a_refusal_by_a_rule_names_it_also_for_waits_and_asyncio(self):
        # Both are answered through the library's callback, not in the
        # calling thread: the node's reason must come with the answer.
        alice = os.path.join(certs, "client-alice")
        with client(cert=alice + ".pem", key=alice + ".key") as c, c.session(ttl=5) as s:
            with self.assertRaises(raftlock.PermissionDenied) as waited:
                s.lock("secure/wait").acquire(timeout=5)

            async def acquire_async():
                async with s.lock_async("secure/async", timeout=5):
                    self.fail("alice has no rule")

            with self.assertRaises(raftlock.PermissionDenied) as awaited:
                asyncio.run(acquire_async())
        self.assertIn("acquire 'secure/wait'", str(waited.exception))
        self.assertIn("identity 'alice' has no 'lock' on 'secure/wait'", str(waited.exception))
        self.assertIn("acquire 'secure/async'", str(awaited.exception))
        self.assertIn("identity 'alice' has no 'lock' on 'secure/async'", str(awaited.exception))

    def test_a_certificate_of_another_ca_is_refused(self):
        other = os.path.join(os.path.dirname(certs), "other", "client-mallory")
        with client(cert=other + ".pem", key=other + ".key") as c:
            with self.assertRaises(raftlock.TLSError) as cm:
                c.session(ttl=5)
        self.assertEqual(cm.exception.code, raftlock.Code.ETLS)
        self.assertIn("CA", str(cm.exception))

    def test_access_rules(self):
        alice = os.path.join(certs, "client-alice")
        with client() as root, client(cert=alice + ".pem", key=alice + ".key") as c:
            root.acl_set("alice", "secure/alice/", "lock,read")
            self.assertIn(("alice", "secure/alice/", "lock,read"),
                          [(r.identity, r.prefix, r.perms) for r in root.acl_rules()])
            with c.lock("secure/alice/job", timeout=5) as token:
                self.assertTrue(c.check_token("secure/alice/job", token))
            with self.assertRaises(raftlock.PermissionDenied):
                c.acl_set("alice", "", "admin")  # alice is no admin
            with self.assertRaises(raftlock.InvalidArgument):
                root.acl_set("alice", "secure/", "write")
            root.acl_delete("alice", "secure/alice/")
            with self.assertRaises(raftlock.NotFound):
                root.acl_delete("alice", "secure/alice/")
            with self.assertRaises(raftlock.PermissionDenied):
                with c.lock("secure/alice/job", timeout=5):
                    self.fail("the rule is gone")

    def test_another_server_name_is_refused(self):
        with client(server_name="not-a-node.example") as c:
            with self.assertRaises(raftlock.TLSError) as cm:
                c.session(ttl=5)
        self.assertIn("mismatch", str(cm.exception))

    def test_an_unknown_token_is_refused(self):
        with client(token="no-such-token-0123456789") as c:
            with self.assertRaises(raftlock.PermissionDenied) as cm:
                c.session(ttl=5)
        self.assertIn("no such token", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
