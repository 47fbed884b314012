"""test_nodesim.py with network agents (issue 30): every simulated node joins
hpodd with its launch's join token (the real agent's join: hpodd's CA checked
against the token's pin, a key made on the node, a CSR signed by hpodd) and then
holds its channel over mutual TLS with that certificate, as nodes on other
machines do. The same faults, the same assertions: each failed node recovered
once, none other touched; each node, replacements included, joined once.
HPOD_NODESIM_TLS_NODES sets the size (default 200: the joins are what is added).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import hpodtest  # noqa: E402
import test_nodesim  # noqa: E402


class NodeSimTlsTest(test_nodesim.NodeSimTest):
    tls = True
    NODES = int(os.environ.get("HPOD_NODESIM_TLS_NODES", "200"))


if __name__ == "__main__":
    hpodtest.main()
