"""Every example of client/python/examples runs against a real cluster
and prints what it promises."""

import os
import subprocess
import sys
import unittest

from cluster import start_for_module

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")

# example -> a line its output must contain
EXPECTED = {
    "lock.py": "migrating with fencing token ",
    "rwlock.py": "the writer waits for the readers",
    "semaphore.py": "at most 2 ran at once (limit 2)",
    "asyncio_lock.py": "20 jobs ran one at a time",
    "lost_session.py": "step 4 under token ",
    "fencing.py": "write of 'late write of the first holder' refused",
}

cluster = None


def setUpModule():
    global cluster
    cluster = start_for_module()


class Examples(unittest.TestCase):
    def test_one_example_per_feature(self):
        self.assertEqual(sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")),
                         sorted(EXPECTED))

    def test_each_example_runs(self):
        env = dict(os.environ, RAFTLOCK_ENDPOINTS=cluster.endpoints,
                   PYTHONPATH=os.pathsep.join(sys.path))
        for name, expected in EXPECTED.items():
            with self.subTest(example=name):
                p = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)], env=env,
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn(expected, p.stdout)


if __name__ == "__main__":
    unittest.main()
