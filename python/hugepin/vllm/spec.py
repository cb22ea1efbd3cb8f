"""HugepinOffloadingSpec: the class vLLM's offloading connector loads by spec_name and spec_module_path.

vLLM makes one in its scheduler process, which asks it for the manager, and one in every worker
process, which asks for the worker (current generation) or the handlers (earlier generation). It
takes either constructor vLLM has used: (config: OffloadingConfig), or (vllm_config,
kv_cache_config); hugepin.vllm.layout reads both.
"""

from __future__ import annotations

import logging

import hugepin
from hugepin.vllm import interface
from hugepin.vllm.arena import open_arena, save_index
from hugepin.vllm.layout import EngineLayout, arena_name
from hugepin.vllm.load_store_spec import HugepinLoadStoreSpec
from hugepin.vllm.manager import HugepinOffloadingManager
from hugepin.vllm.options import Options
from hugepin.vllm.rendezvous import Rendezvous
from hugepin.vllm.worker import HugepinOffloadingHandler, HugepinOffloadingWorker, RankCopier

logger = logging.getLogger("hugepin.vllm")


class HugepinOffloadingSpec(interface.OffloadingSpec):
    """hugepin's host tier for vLLM's OffloadingConnector:

        --kv-transfer-config '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
          "kv_connector_extra_config": {"spec_name": "HugepinOffloadingSpec",
          "spec_module_path": "hugepin.vllm", "cpu_bytes_to_use": 68719476736}}'

    Attributes after construction: `layout` (EngineLayout), `options` (Options), `arena` (its
    name), `num_blocks` (the chunk count vLLM's CPU spec would size for the same budget; the plan,
    which counts each rank's own payload, decides the arena's). InvalidArgumentError names a bad
    key of kv_connector_extra_config."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.layout = EngineLayout.of(self)
        self.options = Options.parse(self.extra_config)
        self.arena = self.options.arena or arena_name(self.layout.engine_id)
        self.num_blocks = self.layout.estimated_chunks(self.options.cpu_bytes)
        self._manager: HugepinOffloadingManager | None = None
        self._copier: RankCopier | None = None

    def get_manager(self) -> HugepinOffloadingManager:
        """The scheduler process's manager: waits for every rank's KV layout (the ranks register
        theirs before vLLM makes its scheduler), plans and creates (or adopts) the arena. Made once."""
        if self._manager is None:
            rendezvous = Rendezvous(self.options.rendezvous_dir, self.arena)
            scheduler, stored, printed = open_arena(self.arena, self.layout, self.options, rendezvous)
            keep = self.options.daemon_socket is not None

            def on_shutdown(manager):
                if keep:
                    save_index(rendezvous, manager, printed)
                else:
                    rendezvous.remove_all()

            self._manager = HugepinOffloadingManager(scheduler, events=self.layout.events, stored=stored,
                                                     on_shutdown=on_shutdown)
            if self._manager.num_blocks != self.num_blocks:
                logger.info("hugepin.vllm: %d chunks planned from each rank's own payload (vLLM's CPU sizing: %d)",
                            self._manager.num_blocks, self.num_blocks)
        return self._manager

    def _rank_copier(self, kv_caches) -> RankCopier:
        if self._copier is None:
            self._copier = RankCopier(self.layout, self.options, self.arena, kv_caches)
        return self._copier

    def get_worker(self, kv_caches) -> HugepinOffloadingWorker:
        """This rank's OffloadingWorker over its canonical KV caches (current vLLM). Returns at once;
        the rank attaches the arena in the background once the scheduler process made it."""
        return HugepinOffloadingWorker(self._rank_copier(kv_caches))

    def get_handlers(self, kv_caches):
        """This rank's two OffloadingHandlers (the earlier vLLM generation): GPU -> host, host -> GPU."""
        copier = self._rank_copier(kv_caches)
        yield interface.GPULoadStoreSpec, HugepinLoadStoreSpec, HugepinOffloadingHandler(copier, hugepin.STORE)
        yield HugepinLoadStoreSpec, interface.GPULoadStoreSpec, HugepinOffloadingHandler(copier, hugepin.LOAD)
