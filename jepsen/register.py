#!/usr/bin/env python3
"""The fenced register: the resource that raftlock's locks protect.

Per lock it keeps the highest fencing token it has seen and a counter.
An access (read or write) with a token lower than the highest is refused;
an accepted access raises the highest token to its own. Every access is
logged as one JSON line (see jepsen/README.md) with CLOCK_MONOTONIC time,
the clock the workers use.

Protocol: TCP, one JSON object per line each way.
  {"op": "read", "lock": L, "token": T, "client": P}
      -> {"ok": true, "value": V}
  {"op": "read", "lock": L, "token": T, "client": P, "shared": true}
      -> a reader of a read-write lock: accepted when T is at least the
         highest token, which it does not raise (readers share the lock)
  {"op": "write", "lock": L, "token": T, "value": V, "client": P}
      -> {"ok": true, "value": V}
  refused -> {"ok": false, "error": "refused", "highest": H}
  {"op": "dump"} -> {"ok": true, "locks": {L: {"highest": H, "value": V}}}

    register.py --listen 127.0.0.1:7000 --log register.jsonl
"""

import argparse
import os
import json
import signal
import socketserver
import sys
import threading
import time


class Register:
    def __init__(self, log):
        self.mu = threading.Lock()
        self.highest = {}
        self.value = {}
        self.log = log

    def _log(self, ev):
        self.log.write(json.dumps(ev, sort_keys=True) + "\n")
        self.log.flush()

    def handle(self, req):
        op = req.get("op")
        if op == "dump":
            with self.mu:
                return {"ok": True, "locks": {
                    k: {"highest": self.highest.get(k),
                        "value": self.value.get(k, 0)}
                    for k in self.highest}}
        lock = req.get("lock")
        token = req.get("token")
        if op not in ("read", "write") or not isinstance(lock, str) or \
                not isinstance(token, int):
            return {"ok": False, "error": "bad request"}
        if op == "write" and not isinstance(req.get("value"), int):
            return {"ok": False, "error": "bad request"}
        with self.mu:
            h = self.highest.get(lock)
            ev = {"time": time.monotonic_ns(), "process": "register",
                  "f": op, "lock": lock, "token": token,
                  "client": req.get("client"), "highest": h}
            shared = op == "read" and req.get("shared") is True
            if shared:
                ev["shared"] = True
            if h is not None and token < h:
                ev["type"] = "refuse"
                self._log(ev)
                return {"ok": False, "error": "refused", "highest": h}
            if not shared:
                self.highest[lock] = token
            prev = self.value.get(lock, 0)
            if op == "write":
                self.value[lock] = req["value"]
                ev["prev"] = prev
            ev["value"] = self.value.get(lock, 0)
            ev["type"] = "accept"
            self._log(ev)
            return {"ok": True, "value": ev["value"]}


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        reg = self.server.register
        for line in self.rfile:
            try:
                req = json.loads(line)
                resp = reg.handle(req) if isinstance(req, dict) else \
                    {"ok": False, "error": "bad request"}
            except ValueError:
                resp = {"ok": False, "error": "bad request"}
            self.wfile.write((json.dumps(resp) + "\n").encode())
            self.wfile.flush()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--log", required=True)
    ap.add_argument("--port-file", help="write the bound port here")
    args = ap.parse_args(argv)
    host, port = args.listen.rsplit(":", 1)
    with open(args.log, "a", encoding="utf-8") as log:
        srv = Server((host, int(port)), Handler)
        srv.register = Register(log)
        if args.port_file:
            with open(args.port_file + ".tmp", "w") as f:
                f.write("%d\n" % srv.server_address[1])
            os.rename(args.port_file + ".tmp", args.port_file)
        signal.signal(signal.SIGTERM, lambda *a: threading.Thread(
            target=srv.shutdown, daemon=True).start())
        try:
            srv.serve_forever(poll_interval=0.2)
        finally:
            srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
