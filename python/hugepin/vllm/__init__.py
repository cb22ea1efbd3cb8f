"""hugepin.vllm: hugepin's host tier as an offloading spec that vLLM loads by module path.

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "OffloadingConnector",
        "kv_role": "kv_both", "kv_connector_extra_config": {"spec_name": "HugepinOffloadingSpec",
        "spec_module_path": "hugepin.vllm", "cpu_bytes_to_use": 68719476736}}'

vLLM's OffloadingConnector imports this module, finds HugepinOffloadingSpec and checks it is an
OffloadingSpec; no change to vLLM. The scheduler process gets a HugepinOffloadingManager (vLLM's
lookup / prepare_store / prepare_load / touch / complete_* over hugepin's copy pins, quorum and
fence), every TP x PP worker process a HugepinOffloadingWorker (or the two handlers of the earlier
interface) copying between its GPU KV and its rank's region of one hugepin arena. The keys of
kv_connector_extra_config are in hugepin.vllm.options; docs/vllm.md says which vLLM versions it
fits and how it is tested. Without vLLM installed, the classes come from the stand-in of its
interface (hugepin.vllm.standin).
"""

from hugepin.vllm import interface
from hugepin.vllm.load_store_spec import HugepinLoadStoreSpec
from hugepin.vllm.manager import HugepinOffloadingManager
from hugepin.vllm.spec import HugepinOffloadingSpec
from hugepin.vllm.worker import HugepinOffloadingHandler, HugepinOffloadingWorker

GENERATION = interface.GENERATION
"""The vLLM interface generation in use: "current" (get_worker) or "handlers" (get_handlers)."""

__all__ = ["GENERATION", "HugepinLoadStoreSpec", "HugepinOffloadingHandler", "HugepinOffloadingManager",
           "HugepinOffloadingSpec", "HugepinOffloadingWorker"]
