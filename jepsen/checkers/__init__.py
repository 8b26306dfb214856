"""Checkers of raftlock histories (see jepsen/README.md for the format)."""
