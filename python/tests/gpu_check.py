"""The GPU test without pytest, for a GPU host that may not have it (python/gpu-host-check.sh):
scenarios.run_tp2 with CUDA tensors and the GPU backend, and scenarios.check_cuda_tensors. Prints
one line per check; exit status 0 when both held, 1 otherwise, 77 without a CUDA device.

Usage: PYTHONPATH=<the package's folder> python3 python/tests/gpu_check.py
"""

import os
import sys
import time
import traceback

import torch

import hugepin
from scenarios import check_cuda_tensors, run_tp2


def main() -> int:
    if not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device for torch {torch.__version__}", file=sys.stderr)
        return 77
    print(f"gpu_check: hugepin {hugepin.__version__} ({hugepin.library_path()}), torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(0)}")
    failed = 0
    checks = (("tp2 offload, GPU backend", lambda arena: run_tp2(arena, "gpu")),
              ("CUDA tensors: bad input, a store on a torch stream", check_cuda_tensors))
    for index, (name, check) in enumerate(checks):
        arena = f"gpucheck-{os.getpid()}-{index}"
        start = time.monotonic()
        try:
            check(arena)
            print(f"PASS  {name} ({time.monotonic() - start:.1f} s)")
        except Exception:  # noqa: BLE001 (every failure is reported, then the next check runs)
            failed += 1
            print(f"FAIL  {name}:\n{traceback.format_exc()}")
        finally:
            try:
                hugepin.destroy_arena(arena)
            except hugepin.NotFoundError:
                pass
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
