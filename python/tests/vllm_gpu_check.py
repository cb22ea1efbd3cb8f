"""hugepin.vllm on a GPU host, without pytest (python/gpu-host-check.sh, step "vllm"):

1. the connector's sequence (vllm_scenarios.run_connector_sequence: store, quorum, hit, load from a
   whole and a partial chunk, an eviction whose chunk a rank still holds, a rank killed mid-store
   and replaced) with CUDA tensors shaped like a real model's KV cache (32 layers, 8 KV heads, 4
   per rank, head size 128, block size 16, bf16) at TP 2, both rank processes on one GPU, the
   region pinned and copied by hugepin's GPU engine, every block checked;
2. python/bench/vllm_offload.py: stores and loads of the plug-in beside vLLM's own way
   (cudaMemcpyBatchAsync over torch.empty(pin_memory=True) memory) on the same blocks.

Prints one PASS or FAIL line per check, and the throughput table. Exit status 0 when both held, 1
otherwise, 77 without a CUDA device. Needs the hugepin package on PYTHONPATH (a build of libhugepin
with CUDA), torch with CUDA and numpy; no vLLM (the stand-in of its interface is used).

Usage: PYTHONPATH=<the package's folder> python3 python/tests/vllm_gpu_check.py [--blocks 256] [--reps 7]
"""

import argparse
import os
import sys
import time
import traceback

os.environ["HUGEPIN_VLLM_STANDIN"] = "current"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import torch  # noqa: E402
from vllm_scenarios import Connector, Model, run_connector_sequence, sequence_engine  # noqa: E402

import hugepin  # noqa: E402


def sequence(arena: str) -> None:
    model = Model(layers=(32,), kv_heads=4, head_size=128, num_blocks=32)
    connector = Connector(sequence_engine(model, tp=2, pp=1, arena=arena, page_size=None), device="cuda:0")
    try:
        described = [rank.request({"op": "describe"}) for rank in connector.ranks]
        assert all(d["pinned"] for d in described), described
        print(f"      arena '{arena}': page size {described[0]['page_size']}, {len(described[0]['segments'])} segments "
              f"of {described[0]['segments'][0]} bytes per rank, regions pinned for cuda:0")
        run_connector_sequence(connector)
    finally:
        codes = connector.close()
    assert codes == [0, 0], codes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=256)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"vllm_gpu_check: no CUDA device for torch {torch.__version__}", file=sys.stderr)
        return 77
    import vllm_offload

    print(f"vllm_gpu_check: hugepin {hugepin.__version__} ({hugepin.library_path()}), torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)}")
    checks = (("the connector's sequence, CUDA tensors, TP 2 on one GPU", lambda: sequence(f"gpucheck-vllm-{os.getpid()}")),
              ("stores and loads beside vLLM's way", lambda: vllm_offload.print_table(
                  vllm_offload.measure("cuda:0", args.blocks, args.reps))))
    failed = 0
    for name, check in checks:
        start = time.monotonic()
        try:
            check()
            print(f"PASS  {name} ({time.monotonic() - start:.1f} s)", flush=True)
        except Exception:  # noqa: BLE001 (every failure is reported, then the next check runs)
            failed += 1
            print(f"FAIL  {name}:\n{traceback.format_exc()}", flush=True)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
