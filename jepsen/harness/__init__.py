"""The harness: network, cluster, nemeses, runner, plots."""
