"""What the plug-in needs of vLLM's configuration, from either spec constructor.

vLLM has made offloading specs two ways: from (vllm_config, kv_cache_config) until PR #48150, from
one OffloadingConfig since. EngineLayout.of(spec) reads the same few facts from whichever the spec's
base class kept: the engine id, TP and PP sizes, this process's worker rank, GPU blocks per
offloaded block (a hugepin chunk), one worker's KV bytes per GPU block, and whether KV events are
wanted.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from hugepin.errors import InvalidArgumentError


@dataclass(frozen=True)
class EngineLayout:
    engine_id: str          # "" when vLLM gave none
    tp: int
    pp: int
    rank: int               # worker index, pp_rank * tp + tp_rank (0 in the scheduler process)
    blocks_per_chunk: int   # GPU blocks per offloaded block: one hugepin chunk
    worker_kv_bytes_per_block: int  # one worker's KV bytes per GPU block, as vLLM counts them
    events: bool            # vLLM publishes KV cache events: the manager collects OffloadingEvents

    @property
    def ranks(self) -> int:
        return self.tp * self.pp

    @classmethod
    def of(cls, spec) -> EngineLayout:
        """The layout of a spec made by either constructor. InvalidArgumentError for context
        parallelism (prefill or decode) other than 1."""
        config = getattr(spec, "config", None)
        if config is not None and hasattr(config, "parallel"):
            return cls._from_offloading_config(config)
        return cls._from_vllm_config(spec)

    @classmethod
    def _from_offloading_config(cls, config) -> EngineLayout:
        parallel = config.parallel
        _one_context(parallel.pcp_size, parallel.dcp_size)
        return cls(engine_id=_engine_id(config.engine_id), tp=parallel.tp_size, pp=parallel.pp_size,
                   rank=parallel.rank, blocks_per_chunk=config.cache.blocks_per_chunk,
                   worker_kv_bytes_per_block=config.worker_kv_bytes_per_block,
                   events=bool(config.enable_kv_cache_events))

    @classmethod
    def _from_vllm_config(cls, spec) -> EngineLayout:
        vllm_config, kv_cache_config = spec.vllm_config, spec.kv_cache_config
        parallel = vllm_config.parallel_config
        _one_context(getattr(parallel, "prefill_context_parallel_size", 1),
                     getattr(parallel, "decode_context_parallel_size", 1))
        num_blocks = kv_cache_config.num_blocks
        total = sum(tensor.size for tensor in kv_cache_config.kv_cache_tensors)
        events = vllm_config.kv_events_config
        return cls(engine_id=_engine_id(vllm_config.kv_transfer_config.engine_id),
                   tp=parallel.tensor_parallel_size, pp=parallel.pipeline_parallel_size, rank=parallel.rank,
                   blocks_per_chunk=getattr(spec, "block_size_factor", 1),
                   worker_kv_bytes_per_block=total // num_blocks if num_blocks else 0,
                   events=bool(events is not None and events.enable_kv_cache_events))

    def estimated_chunks(self, cpu_bytes: int) -> int:
        """The chunk count vLLM's CPU spec would size: cpu_bytes over the bytes of one offloaded block
        of every worker (equal payloads assumed; the plan counts each rank's own)."""
        per_chunk = self.worker_kv_bytes_per_block * self.ranks * self.blocks_per_chunk
        return cpu_bytes // per_chunk if per_chunk > 0 else 0


def _one_context(pcp: int, dcp: int) -> None:
    if pcp != 1 or dcp != 1:
        raise InvalidArgumentError(f"prefill context parallel size {pcp}, decode context parallel size {dcp}: "
                                   "hugepin.vllm supports 1 for both")


def _engine_id(engine_id) -> str:
    return engine_id if isinstance(engine_id, str) else ""


_SPELLING = re.compile(r"[^A-Za-z0-9._-]")


def arena_name(engine_id: str) -> str:
    """The default arena name: 'vllm-' and the engine id (InvalidArgumentError for none); characters an arena name cannot hold become '-', and a name that
    changed so or is longer than 64 gets a digest of the whole id, so that two engines never share one."""
    if not engine_id:
        raise InvalidArgumentError("engine_id = '': the arena is named from the engine id; give one "
                                   "(kv_transfer_config.engine_id) or set hugepin_arena")
    spelled = "vllm-" + _SPELLING.sub("-", engine_id)
    if spelled == "vllm-" + engine_id and len(spelled) <= 64:
        return spelled
    digest = hashlib.sha256(engine_id.encode()).hexdigest()[:12]
    return spelled[:64 - len(digest) - 1] + "-" + digest
