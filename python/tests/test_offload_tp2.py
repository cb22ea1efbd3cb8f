"""TP=2 across processes, as examples/c/offload.c does it in C: a Python scheduler (this process)
and two Python worker processes (hugepin.demo's worker, driven over its JSON-lines channel), host
memcpy. Stores (each rank stamps its device blocks, stores them and checks its region through torch
tensors over it), the quorum (a job one rank reported does not complete), loads (checked on the
device side), retire and the fence (retired chunks come back only once both ranks released the
epoch), reuse of a chunk that came back (scenarios.run_tp2). test_offload_tp2_gpu.py runs the same
with CUDA tensors."""

from scenarios import run_tp2


def test_tp2_offload_host_memcpy(arena):
    run_tp2(arena, "host")
