"""A stand-in of vLLM's KV offloading interface, for machines without vLLM (CI, this project's tests).

hugepin.vllm is written against vLLM's own classes; when `import vllm` fails, hugepin.vllm.interface
takes them from here instead, so that the plug-in can be imported, driven and tested. Only the
interface is here: the abstract classes a backend implements and the data types it receives and
returns, with vLLM's module roles, names, signatures and field names, as the vLLM commits below
have them. No vLLM behaviour (scheduling, hashing, the connector) is reproduced: the tests drive
the plug-in in the connector's order themselves.

Two generations, one module each:

  current   the OffloadingWorker generation: OffloadingSpec(config: OffloadingConfig) with
            get_manager() and get_worker(kv_caches) -> OffloadingWorker (submit_store, submit_load,
            get_finished, wait); OffloadingManager.lookup(key, req_context) -> LookupResult.
            vllm/v1/kv_offload/base.py at 0105e232b7fa4e1b59ec87531f167c0443a5095d and
            vllm/v1/kv_offload/config.py at 006f89ace7ca5b01ba9e0fe9633029d8c4206dea
            (OffloadingWorker: vLLM PR #45053; the OffloadingConfig constructor: PR #48150).
  handlers  the OffloadingHandler generation: OffloadingSpec(vllm_config, kv_cache_config) with
            get_manager() and get_handlers(kv_caches) yielding (src type, dst type, handler), each
            handler an OffloadingHandler (transfer_async, get_finished, wait) that the connector's
            OffloadingWorker registry routes to by medium; lookup(key, req_context) -> bool | None.
            vllm/v1/kv_offload/base.py at 14d6506e258a4e59702f2690c05de70cbcec87f1 and
            vllm/v1/kv_offload/worker/worker.py at 06bb4a63a14b5b1f34ad9455e8e4aa017ee6e0f3, with the
            few attributes of VllmConfig and KVCacheConfig that an offloading spec reads.

HUGEPIN_VLLM_STANDIN=current|handlers makes hugepin.vllm use that generation of the stand-in even
where vLLM is installed (the tests set it, so that they test the same thing everywhere).
"""

GENERATIONS = ("current", "handlers")
