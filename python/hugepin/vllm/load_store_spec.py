"""HugepinLoadStoreSpec: the host side of one transfer, as the manager hands it to the workers."""

from __future__ import annotations

import numpy as np

from hugepin.vllm import interface

_Base = interface.BlockIDsLoadStoreSpec or interface.LoadStoreSpec


class HugepinLoadStoreSpec(_Base):
    """Chunks of the arena (vLLM's offloaded blocks: blocks_per_chunk GPU blocks each) in `block_ids`,
    and `job`, the hugepin job the scheduler dispatched over them (pinned until every rank reported
    it), which every rank launches its copies under; job 0 names no chunks and copies nothing.
    Picklable: it travels to the worker processes in the connector's metadata."""

    def __init__(self, chunks, job: int):
        if interface.BlockIDsLoadStoreSpec is not None:
            super().__init__(list(chunks))
        else:
            self.block_ids = np.array(list(chunks), dtype=np.int64)
        self.job = int(job)

    @staticmethod
    def medium() -> str:
        """Host memory: routed by the connector as vLLM's CPU medium."""
        return "CPU"

    def __repr__(self) -> str:
        return f"HugepinLoadStoreSpec(chunks={self.block_ids.tolist()}, job={self.job})"
