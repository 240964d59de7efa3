"""durq's benchmarks: workloads W1-W6 and worker memory, durq beside its peers.

Run ``durq bench --compare`` (or ``python -m bench``). Nothing here is imported by durq
itself; the peers are installed by the ``bench`` extra only.
"""
