"""One Vowpal Wabbit process for tests/bench/peers_compare.sh. The PyPI
package ships no `vw` binary, so this drives VW's own C++ driver over the whole
file: Workspace(ARGS) with -d, run_parser(), finish() (which writes -f / -p).
Python only starts it; no example passes through Python.

usage: peers_vw.py 'VW ARGUMENTS'"""
import sys

import vowpalwabbit

if len(sys.argv) != 2:
    sys.exit("usage: peers_vw.py 'VW ARGUMENTS'")
ws = vowpalwabbit.Workspace(sys.argv[1] + ' --quiet')
ws.run_parser()
ws.finish()
