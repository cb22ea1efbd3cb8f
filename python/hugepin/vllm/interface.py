"""vLLM's offloading interface as the plug-in sees it: from vLLM when it is installed, else from the
stand-in (hugepin.vllm.standin), one generation or the other.

    GENERATION   "current": the spec's get_worker -> OffloadingWorker (submit_store, submit_load)
                 "handlers": the spec's get_handlers -> OffloadingHandler (transfer_async)
    SOURCE       where the classes came from ("vllm 0.x.y: ..." or "stand-in ...")
    the classes  OffloadingSpec, OffloadingManager, LoadStoreSpec, BlockIDsLoadStoreSpec,
                 GPULoadStoreSpec, PrepareStoreOutput, OffloadingEvent, TransferResult; per
                 generation OffloadingWorker (the ABC a worker implements: current only) or
                 OffloadingHandler (handlers only); LookupResult, RequestOffloadingContext and
                 Medium where the generation has them, else None.

HUGEPIN_VLLM_STANDIN=current|handlers chooses the stand-in even where vLLM is installed. A vLLM whose
offloading interface is neither generation (earlier layouts without vllm/v1/kv_offload/base.py, or a
get_handlers of per-layer tensors and attention backends) is refused at import with an ImportError
naming its version.
"""

from __future__ import annotations

import importlib
import inspect
import os

from hugepin.vllm.standin import GENERATIONS


def _from_standin(generation: str) -> dict:
    module = importlib.import_module(f"hugepin.vllm.standin.{generation}")
    names = dict(vars(module))
    names["SOURCE"] = f"the stand-in of vLLM's interface ({module.FOLLOWS})"
    return names


def _from_vllm() -> dict:
    import vllm

    version = getattr(vllm, "__version__", "unknown")
    try:
        base = importlib.import_module("vllm.v1.kv_offload.base")
    except ImportError:
        raise ImportError(f"hugepin.vllm: vLLM {version} has no vllm.v1.kv_offload.base: its offloading interface "
                          "predates both generations hugepin.vllm fits (docs/vllm.md)") from None
    names = dict(vars(base))
    worker_abc = names.get("OffloadingWorker")
    if worker_abc is not None and inspect.isabstract(worker_abc) and hasattr(worker_abc, "submit_store"):
        names["GENERATION"] = "current"
    else:
        names["GENERATION"] = "handlers"
        handlers = importlib.import_module("vllm.v1.kv_offload.worker.worker")
        names.update(OffloadingHandler=handlers.OffloadingHandler, TransferResult=handlers.TransferResult)
        parameters = list(inspect.signature(base.OffloadingSpec.get_handlers).parameters)
        if len(parameters) != 2:
            raise ImportError(f"hugepin.vllm: vLLM {version}'s OffloadingSpec.get_handlers takes {parameters[1:]}; "
                              "hugepin.vllm fits the generations that hand a spec CanonicalKVCaches (docs/vllm.md)")
    names["SOURCE"] = f"vllm {version} ({vllm.__file__})"
    return names


def _resolve() -> dict:
    chosen = os.environ.get("HUGEPIN_VLLM_STANDIN")
    if chosen:
        if chosen not in GENERATIONS:
            raise ImportError(f"HUGEPIN_VLLM_STANDIN = {chosen!r}: give one of {', '.join(GENERATIONS)}")
        return _from_standin(chosen)
    try:
        importlib.import_module("vllm")
    except ImportError:
        return _from_standin("current")
    return _from_vllm()


_names = _resolve()
GENERATION: str = _names["GENERATION"]
SOURCE: str = _names["SOURCE"]
OffloadingSpec = _names["OffloadingSpec"]
OffloadingManager = _names["OffloadingManager"]
LoadStoreSpec = _names["LoadStoreSpec"]
BlockIDsLoadStoreSpec = _names.get("BlockIDsLoadStoreSpec")
GPULoadStoreSpec = _names["GPULoadStoreSpec"]
PrepareStoreOutput = _names["PrepareStoreOutput"]
OffloadingEvent = _names["OffloadingEvent"]
TransferResult = _names["TransferResult"]
OffloadingWorker = _names.get("OffloadingWorker") if GENERATION == "current" else None
OffloadingHandler = _names.get("OffloadingHandler") if GENERATION == "handlers" else None
LookupResult = _names.get("LookupResult")
RequestOffloadingContext = _names.get("RequestOffloadingContext")
Medium = _names.get("Medium")
del _names
