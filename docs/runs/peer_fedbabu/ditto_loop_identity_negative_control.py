"""Negative control of `flb peer fedbabu --config ditto-loop-identity` (2026-12-06): the same comparison with this
suite's side running the paper's Ditto (`ditto`: personal models kept across rounds, the global updates averaged,
the lr decayed) instead of `ditto_reference` (main_ditto.py as written). Expected: DISAGREE.

Run from the suite's checkout, with a checkout of jhoon-oh/FedBABU at e34c15b:
FLB_DATA_ROOT=... python docs/runs/peer_fedbabu/ditto_loop_identity_negative_control.py PATH/TO/FedBABU
(output: ditto_loop_identity_negative_control.log).
"""

import sys
import tempfile
from pathlib import Path

import benchmark.peers.fedbabu as fb
from benchmark.peers.registry import PeerRequest

fb.OURS.clear()  # this suite's side runs the algorithm named "ditto" (the paper's), not ditto_reference
work = Path(tempfile.mkdtemp(prefix="ditto-negative-control-"))
cmp = fb.run(PeerRequest("fedbabu", "ditto-loop-identity", (0,), Path(sys.argv[1]), work))
print(cmp.outcome())
for r in cmp.ours + cmp.theirs:
    print(r.side, r.rounds, r.accuracy, r.final)
