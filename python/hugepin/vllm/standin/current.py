"""Stand-in of vLLM's current offloading interface (the OffloadingWorker generation).

Mirrors vllm/v1/kv_offload/base.py at 0105e232b7fa4e1b59ec87531f167c0443a5095d, the structures of
vllm/v1/kv_offload/config.py at 006f89ace7ca5b01ba9e0fe9633029d8c4206dea, and the way
vllm/v1/kv_offload/factory.py finds a spec by spec_name and spec_module_path. Names, signatures,
field names and defaults are vLLM's; what a backend never sees (metrics plumbing, tier filters of
the tiering manager, KV hints) is left out. Written for this project from vLLM's interface, not
copied from it.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any, NamedTuple, NewType

import numpy as np

GENERATION = "current"
FOLLOWS = ("vllm/v1/kv_offload/base.py@0105e232b7fa4e1b59ec87531f167c0443a5095d, "
           "vllm/v1/kv_offload/config.py@006f89ace7ca5b01ba9e0fe9633029d8c4206dea")

# ------------------------------------------------------------------------------------ keys

# One offloaded block (a chunk of blocks_per_chunk GPU blocks): its block hash, then its KV cache
# group index as 4 big-endian bytes.
OffloadKey = NewType("OffloadKey", bytes)


def make_offload_key(block_hash: bytes, group_idx: int) -> OffloadKey:
    return OffloadKey(block_hash + group_idx.to_bytes(4, "big", signed=False))


def get_offload_block_hash(key: OffloadKey) -> bytes:
    return key[:-4]


def get_offload_group_idx(key: OffloadKey) -> int:
    return int.from_bytes(key[-4:], "big", signed=False)


class Medium(Enum):
    CPU = "CPU"
    STORAGE = "STORAGE"


# ------------------------------------------------------------------------------------ scheduler side


@dataclass
class ReqContext:
    """What the connector knows of the request a manager call is made for."""
    req_id: str
    kv_transfer_params: dict[str, Any] | None = None
    _state: dict = field(default_factory=dict, repr=False, init=False)

    def set_state(self, val: Any) -> None:
        self._state[type(val)] = val

    def get_state(self, cls: type) -> Any:
        return self._state.get(cls)


class LookupResult(Enum):
    MISS = auto()
    HIT = auto()
    HIT_PENDING = auto()  # known, not readable yet (its store is in flight)
    RETRY = auto()


class OffloadPolicy(Enum):
    CHUNK_LEVEL = "chunk_level"
    REQUEST_LEVEL = "request_level"


@dataclass
class RequestOffloadingContext:
    policy: OffloadPolicy = OffloadPolicy.CHUNK_LEVEL


class ScheduleEndContext(NamedTuple):
    new_req_ids: Collection[str]
    preempted_req_ids: Collection[str]


class LoadStoreSpec:
    """Where a worker finds, or puts, the blocks of one transfer on one side."""


@dataclass
class PrepareStoreOutput:
    keys_to_store: list[OffloadKey]
    store_spec: LoadStoreSpec
    evicted_keys: list[OffloadKey]


@dataclass
class OffloadingEvent:
    keys: list[OffloadKey]
    medium: Medium
    removed: bool  # True: the blocks left the tier; False: they were stored
    locality: Any = None
    ownership: str | None = None
    removal_expected: bool = False


@dataclass(frozen=True)
class OffloadingKVEventsConfig:
    enable_kv_cache_events: bool
    self_describing_kv_events: bool


class OffloadingManager(ABC):
    """The scheduler process's side: which blocks are offloaded, where, and what to evict."""

    @abstractmethod
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> LookupResult:
        """Whether one block is offloaded and readable."""

    @abstractmethod
    def prepare_load(self, keys: Collection[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
        """Protects the (readable) blocks from eviction until complete_load; where to read them."""

    def touch(self, keys: Collection[OffloadKey], req_context: ReqContext):
        """Marks the blocks recently used."""
        return

    def complete_load(self, keys: Collection[OffloadKey], req_context: ReqContext):
        """The load of blocks prepare_load protected is over."""
        return

    @abstractmethod
    def prepare_store(self, keys: Collection[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        """Which of the blocks to store, where, and what was evicted for them; None: cannot store."""

    def complete_store(self, keys: Collection[OffloadKey], req_context: ReqContext, success: bool = True):
        """The store of the blocks is over: readable from now on, or (success False) dropped."""
        return

    @abstractmethod
    def on_new_request(self, req_context: ReqContext) -> RequestOffloadingContext:
        """A request the scheduler sees for the first time."""

    def on_request_finished(self, req_context: ReqContext) -> None:
        return

    def take_events(self) -> Iterable[OffloadingEvent]:
        return ()

    def on_schedule_end(self, context: ScheduleEndContext) -> None:
        """Once at the end of every scheduler step."""
        return

    def has_pending_work(self) -> bool:
        return False

    def reset_cache(self) -> None:
        return

    def get_stats(self):
        return None

    def shutdown(self) -> None:
        return


class BlockIDsLoadStoreSpec(LoadStoreSpec, ABC):
    """A transfer side given by block numbers (GPU blocks, or offloaded chunks)."""

    def __init__(self, block_ids: list[int]):
        self.block_ids = np.array(block_ids, dtype=np.int32)

    def __repr__(self) -> str:
        return repr(self.block_ids)


class GPULoadStoreSpec(BlockIDsLoadStoreSpec):
    """GPU blocks of one transfer, ordered by KV cache group: group i has group_sizes[i] of them,
    the first of which is block block_indices[i] of the request (so that a worker can skip the
    part of a first chunk that was not asked for)."""

    def __init__(self, block_ids: list[int], group_sizes: Sequence[int], block_indices: Sequence[int]):
        super().__init__(block_ids)
        assert sum(group_sizes) == len(block_ids)
        assert len(block_indices) == len(group_sizes)
        self.group_sizes = group_sizes
        self.block_indices = block_indices


# ------------------------------------------------------------------------------------ worker side


@dataclass
class CanonicalKVCacheTensor:
    tensor: Any  # torch.Tensor of shape (num_blocks, ...)
    page_size_bytes: int


@dataclass
class CanonicalKVCacheRef:
    tensor_idx: int
    page_size_bytes: int
    mapping: Any = None


@dataclass
class CanonicalKVCaches:
    tensors: list[CanonicalKVCacheTensor]
    group_data_refs: list[list[CanonicalKVCacheRef]]


@dataclass
class TransferResult:
    job_id: int
    success: bool
    transfer_size: int | None = None
    transfer_time: float | None = None


class OffloadingWorker(ABC):
    """The worker process's side, for one offloaded medium."""

    @abstractmethod
    def submit_store(self, job_id: int, src_spec: GPULoadStoreSpec, dst_spec: LoadStoreSpec) -> bool:
        """Starts GPU -> medium; False when it could not be submitted."""

    @abstractmethod
    def submit_load(self, job_id: int, src_spec: LoadStoreSpec, dst_spec: GPULoadStoreSpec) -> bool:
        """Starts medium -> GPU; False when it could not be submitted."""

    @abstractmethod
    def get_finished(self) -> list[TransferResult]:
        """Transfers finished since the last call."""

    @abstractmethod
    def wait(self, job_ids: set[int]) -> None:
        """Blocks until the given jobs finished."""

    def shutdown(self) -> None:
        return


# ------------------------------------------------------------------------------------ configuration


@dataclass(frozen=True)
class OffloadingGroupConfig:
    tokens_per_block: int
    layer_names: tuple[str, ...]


@dataclass(frozen=True)
class OffloadingModelConfig:
    name: str
    dtype: str


@dataclass(frozen=True)
class OffloadingCacheConfig:
    tokens_per_hash: int
    blocks_per_chunk: int


@dataclass(frozen=True)
class OffloadingParallelConfig:
    rank: int  # worker index in [0, world_size); 0 on the scheduler side
    world_size: int
    tp_size: int
    pp_size: int
    pcp_size: int
    dcp_size: int
    data_parallel_index: int
    is_parallelism_agnostic: bool


@dataclass(frozen=True)
class OffloadingConfig:
    groups: tuple[OffloadingGroupConfig, ...]
    worker_kv_bytes_per_block: int  # KV bytes one worker holds per GPU block
    enable_kv_cache_events: bool
    extra_config: Mapping[str, Any]  # kv_connector_extra_config
    engine_id: str  # distinct per engine (per DP rank)
    model: OffloadingModelConfig
    cache: OffloadingCacheConfig
    parallel: OffloadingParallelConfig
    replicated_layout: bool = False
    num_cpu_blocks: int | None = None


class OffloadingSpec(ABC):
    """What kv_connector_extra_config's spec_name / spec_module_path names: made once in the
    scheduler process (get_manager) and once in every worker process (get_worker)."""

    @classmethod
    def build_metric_definitions(cls, extra_config: dict[str, Any]) -> dict:
        return {}

    def __init__(self, config: OffloadingConfig):
        self.config = config
        self.extra_config = config.extra_config
        self.replicated_layout = False
        self.kv_events_config = OffloadingKVEventsConfig(
            enable_kv_cache_events=config.enable_kv_cache_events,
            self_describing_kv_events=bool(self.extra_config.get("self_describing_kv_events", False)))
        self.offload_prompt_only = bool(self.extra_config.get("offload_prompt_only", True))
        self.max_recompute_pending_tokens = int(self.extra_config.get("max_recompute_pending_tokens", 0))
        if self.max_recompute_pending_tokens < 0:
            raise ValueError(f"max_recompute_pending_tokens must be non-negative, got "
                             f"{self.max_recompute_pending_tokens}")
        self.tokens_per_block = tuple(group.tokens_per_block for group in config.groups)
        self.tokens_per_hash = config.cache.tokens_per_hash
        self.blocks_per_chunk = config.cache.blocks_per_chunk

    @abstractmethod
    def get_manager(self) -> OffloadingManager:
        """The scheduler side."""

    @abstractmethod
    def get_worker(self, kv_caches: CanonicalKVCaches) -> OffloadingWorker:
        """A worker process's side, over its canonical KV caches."""


class OffloadingSpecFactory:
    """Finds the spec class as vLLM's factory does: a registered name, else spec_name imported from
    spec_module_path; it must subclass OffloadingSpec."""

    @classmethod
    def create_spec(cls, config: OffloadingConfig) -> OffloadingSpec:
        spec_name = config.extra_config.get("spec_name", "CPUOffloadingSpec")
        spec_module_path = config.extra_config.get("spec_module_path")
        if spec_module_path is None:
            raise ValueError(f"Unsupported spec type: {spec_name}")
        spec_cls = getattr(importlib.import_module(spec_module_path), spec_name)
        assert issubclass(spec_cls, OffloadingSpec)
        return spec_cls(config)
