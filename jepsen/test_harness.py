"""Tests of the harness parts that need no root and no cluster: the fenced
register, the STATUS decoder and the shapes of the partitions."""

import io
import json
import random
import tempfile
import unittest

import register
from harness import nemesis as N
from harness import status


class Register(unittest.TestCase):
    def setUp(self):
        self.log = io.StringIO()
        self.reg = register.Register(self.log)

    def call(self, **req):
        return self.reg.handle(req)

    def test_refuses_lower_tokens_reads_included(self):
        self.assertEqual(self.call(op="read", lock="a", token=5),
                         {"ok": True, "value": 0})
        self.assertTrue(self.call(op="write", lock="a", token=5,
                                  value=1)["ok"])
        self.assertTrue(self.call(op="read", lock="a", token=7)["ok"])
        # A read with 7 raised the bar: the holder of 5 can no longer write.
        r = self.call(op="write", lock="a", token=5, value=2)
        self.assertEqual(r, {"ok": False, "error": "refused", "highest": 7})
        self.assertTrue(self.call(op="read", lock="b", token=1)["ok"])
        events = [json.loads(l) for l in self.log.getvalue().splitlines()]
        self.assertEqual([e["type"] for e in events],
                         ["accept", "accept", "accept", "refuse", "accept"])
        self.assertEqual(events[1]["prev"], 0)
        self.assertEqual(events[3]["highest"], 7)

    def test_shared_reads_do_not_raise_the_bar(self):
        self.assertTrue(self.call(op="read", lock="r", token=9,
                                  shared=True)["ok"])
        self.assertTrue(self.call(op="read", lock="r", token=4,
                                  shared=True)["ok"])
        self.assertTrue(self.call(op="write", lock="r", token=5,
                                  value=1)["ok"])
        self.assertFalse(self.call(op="read", lock="r", token=4,
                                   shared=True)["ok"])

    def test_bad_requests(self):
        self.assertFalse(self.call(op="write", lock="a", token=1)["ok"])
        self.assertFalse(self.call(op="read", lock=3, token=1)["ok"])
        self.assertEqual(self.log.getvalue(), "")


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wt, payload):
    key = varint(num << 3 | wt)
    if wt == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


class Status(unittest.TestCase):
    def test_decodes_a_status_response(self):
        info = (field(1, 0, 2) + field(2, 2, b"leader") + field(3, 0, 7) +
                field(7, 0, 2) + field(11, 0, 1 << 60) + field(14, 0, 1) +
                field(9, 2, field(1, 0, 1)))  # a member: skipped
        env = field(1, 0, 1) + field(40, 2, field(11, 2, info))
        st = status.decode_status(env)
        self.assertEqual(st["node_id"], 2)
        self.assertEqual(st["role"], "leader")
        self.assertEqual(st["term"], 7)
        self.assertEqual(st["next_token"], 1 << 60)
        self.assertTrue(st["ready"])

    def test_error_status_and_garbage(self):
        env = field(40, 2, field(1, 0, (1 << 64) - 6))
        self.assertEqual(status.decode_status(env)["status"], -6)
        with self.assertRaises(ValueError):
            status.decode_status(b"\x52\x05ab")


class FakeNode:
    def __init__(self, i):
        self.i = i


class FakeCluster:
    def __init__(self, n, leader):
        self.nodes = [FakeNode(i) for i in range(1, n + 1)]
        self._leader = leader

    def leader(self):
        return self._leader


class FakeNet:
    def __init__(self):
        self.cut = None
        self.partitioned = False

    def partition(self, cut):
        self.cut = cut

    def heal(self):
        self.cut = None


class Partitions(unittest.TestCase):
    def shapes(self, n):
        seen = {}
        with tempfile.TemporaryDirectory() as d:
            log = N.Log(d)
            for seed in range(60):
                net = FakeNet()
                nem = N.Nemesis(FakeCluster(n, 2), net, random.Random(seed),
                                log, 3000)
                undo, fields = nem._partition()
                seen[fields["mode"]] = (net.cut, fields)
            log.close()
        return seen

    def reach(self, n, cut, i):
        return {j for j in range(1, n + 1) if j not in cut.get(i, set())}

    def test_shapes_on_five_nodes(self):
        seen = self.shapes(5)
        self.assertEqual(set(seen), {"isolate-leader", "halves", "bridge",
                                     "ring"})
        cut, _ = seen["isolate-leader"]
        self.assertEqual(cut[2], {1, 3, 4, 5})
        for i in (1, 3, 4, 5):
            self.assertEqual(cut[i], {2})
        cut, _ = seen["halves"]
        sides = sorted(len(self.reach(5, cut, i)) for i in range(1, 6))
        self.assertEqual(sides, [2, 2, 3, 3, 3])
        cut, fields = seen["bridge"]
        bridge = [i for i in range(1, 6) if i not in cut]
        self.assertEqual(len(bridge), 1)
        cut, _ = seen["ring"]
        views = [frozenset(self.reach(5, cut, i)) for i in range(1, 6)]
        self.assertTrue(all(len(v) == 3 for v in views))  # a majority each
        self.assertEqual(len(set(views)), 5)  # no two the same
        for i in range(1, 6):  # symmetric
            for j in cut[i]:
                self.assertIn(i, cut[j])

    def test_shapes_on_three_nodes(self):
        seen = self.shapes(3)
        self.assertNotIn("ring", seen)
        cut, _ = seen["bridge"]
        self.assertEqual(len(cut), 2)


if __name__ == "__main__":
    unittest.main()
