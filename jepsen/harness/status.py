"""Asks raftlockd nodes for their own view (STATUS, no quorum needed), so
the nemesis can find the leader without the client library.

    python3 status.py [--cacert F [--cert F --key F]] HOST:PORT [...]
        -> JSON list on stdout, in the order given

Speaks the client protocol directly: a 4-byte big-endian length, then one
protobuf Envelope (proto/raftlock.proto). Only the few fields needed here
are decoded. With --cacert the connection is TLS: the node's certificate
must be signed by that CA and carry the address's IP; --cert and --key
present a client certificate (client-tls = mutual). STATUS needs no
identity, even with auth = on (docs/GUARANTEES.md, rule 15). The nodes are
asked at once, so that paused ones cost one timeout in all.
"""

import contextlib
import json
import socket
import ssl
import struct
import sys
import threading

# Envelope{id = 1, status = StatusRequest{}}
STATUS_REQUEST = bytes([0x08, 0x01, 0x52, 0x00])

ENVELOPE_RESPONSE = 40
RESPONSE_STATUS = 1
RESPONSE_STATUS_INFO = 11
INFO_FIELDS = {1: "node_id", 2: "role", 3: "term", 4: "commit_index",
               5: "applied_index", 6: "last_index", 7: "leader_id",
               8: "leader_address", 10: "cluster_time", 11: "next_token",
               14: "ready", 15: "cluster"}
INFO_STRINGS = {"role", "leader_address", "cluster"}


def _varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def fields(buf):
    """Yields (field number, wire type, value) of one message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            n, i = _varint(buf, i)
            v = buf[i:i + n]
            if len(v) != n:
                raise ValueError("truncated field")
            i += n
        elif wt == 1:
            v = buf[i:i + 8]
            i += 8
        elif wt == 5:
            v = buf[i:i + 4]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def decode_status(envelope):
    out = {}
    for num, wt, v in fields(envelope):
        if num != ENVELOPE_RESPONSE or wt != 2:
            continue
        for rnum, rwt, rv in fields(v):
            if rnum == RESPONSE_STATUS and rwt == 0:
                st = rv - (1 << 64) if rv >= 1 << 63 else rv
                if st:
                    out["status"] = st
            if rnum == RESPONSE_STATUS_INFO and rwt == 2:
                for inum, iwt, iv in fields(rv):
                    name = INFO_FIELDS.get(inum)
                    if name is None:
                        continue
                    if name in INFO_STRINGS:
                        out[name] = bytes(iv).decode(errors="replace")
                    elif name == "ready":
                        out[name] = bool(iv)
                    else:
                        out[name] = iv
    out.setdefault("ready", False)
    return out


def tls_context(cacert, cert=None, key=None):
    """A client context that verifies the node against `cacert` and the
    address's host, presenting `cert`/`key` when given."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cacert)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def _exchange(s):
    s.sendall(struct.pack(">I", len(STATUS_REQUEST)) + STATUS_REQUEST)
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            raise OSError("closed")
        head += chunk
    n = struct.unpack(">I", head)[0]
    if n > 1 << 20:
        raise ValueError("frame too large")
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            raise OSError("closed")
        body += chunk
    return body


def ask(address, timeout=1.0, ctx=None):
    host, port = address.rsplit(":", 1)
    res = {"address": address}
    try:
        with socket.create_connection((host, int(port)), timeout) as raw:
            raw.settimeout(timeout)
            with (ctx.wrap_socket(raw, server_hostname=host) if ctx
                  else contextlib.nullcontext(raw)) as s:
                body = _exchange(s)
        res.update(decode_status(body))
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
        res["error"] = str(e) or type(e).__name__
    return res


def ask_all(addresses, timeout=1.0, ctx=None):
    out = [None] * len(addresses)

    def one(i):
        out[i] = ask(addresses[i], timeout, ctx)

    threads = [threading.Thread(target=one, args=(i,))
               for i in range(len(addresses))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main(argv):
    opts = {}
    while argv and argv[0] in ("--cacert", "--cert", "--key"):
        if len(argv) < 2:
            raise SystemExit("status.py: %s needs a file" % argv[0])
        opts[argv[0][2:]] = argv[1]
        argv = argv[2:]
    ctx = None
    if "cacert" in opts:
        ctx = tls_context(opts["cacert"], opts.get("cert"), opts.get("key"))
    elif opts:
        raise SystemExit("status.py: --cert and --key need --cacert")
    print(json.dumps(ask_all(argv, ctx=ctx)))


if __name__ == "__main__":
    main(sys.argv[1:])
