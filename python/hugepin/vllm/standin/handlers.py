"""Stand-in of vLLM's earlier offloading interface (the OffloadingHandler generation).

Mirrors vllm/v1/kv_offload/base.py at 14d6506e258a4e59702f2690c05de70cbcec87f1 (the spec made from
vllm_config and kv_cache_config, get_handlers, lookup returning bool | None) and
vllm/v1/kv_offload/worker/worker.py at 06bb4a63a14b5b1f34ad9455e8e4aa017ee6e0f3 (OffloadingHandler,
TransferSpec, and the connector's OffloadingWorker that routes a transfer to the handler registered
for its (source medium, destination medium)), plus the attributes of vLLM's VllmConfig and
KVCacheConfig that an offloading spec reads, under their vLLM names. Written for this project from
vLLM's interface, not copied from it.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# What both generations define alike (keys, the store decision, the canonical KV tensors).
from hugepin.vllm.standin.current import (CanonicalKVCaches, CanonicalKVCacheTensor, OffloadKey,  # noqa: F401
                                          PrepareStoreOutput, get_offload_block_hash, get_offload_group_idx,
                                          make_offload_key)

GENERATION = "handlers"
FOLLOWS = ("vllm/v1/kv_offload/base.py@14d6506e258a4e59702f2690c05de70cbcec87f1, "
           "vllm/v1/kv_offload/worker/worker.py@06bb4a63a14b5b1f34ad9455e8e4aa017ee6e0f3")


@dataclass
class ReqContext:
    req_id: str
    kv_transfer_params: dict[str, Any] | None = None


class LoadStoreSpec(ABC):
    """Where a worker finds, or puts, the blocks of one transfer on one side."""

    @staticmethod
    @abstractmethod
    def medium() -> str:
        """The medium, as the connector routes transfers by it ("GPU", "CPU", ...)."""


@dataclass
class OffloadingEvent:
    keys: list[OffloadKey]
    medium: str
    removed: bool


class OffloadingManager(ABC):
    """The scheduler process's side: which blocks are offloaded, where, and what to evict."""

    @abstractmethod
    def lookup(self, key: OffloadKey, req_context: ReqContext) -> bool | None:
        """True: offloaded and readable; False: not; None: ask again later."""

    @abstractmethod
    def prepare_load(self, keys: Collection[OffloadKey], req_context: ReqContext) -> LoadStoreSpec:
        """Protects the (readable) blocks from eviction until complete_load; where to read them."""

    def touch(self, keys: Collection[OffloadKey], req_context: ReqContext):
        return

    def complete_load(self, keys: Collection[OffloadKey], req_context: ReqContext):
        return

    @abstractmethod
    def prepare_store(self, keys: Collection[OffloadKey], req_context: ReqContext) -> PrepareStoreOutput | None:
        """Which of the blocks to store, where, and what was evicted for them; None: cannot store."""

    def complete_store(self, keys: Collection[OffloadKey], req_context: ReqContext, success: bool = True):
        return

    def take_events(self) -> Iterable[OffloadingEvent]:
        return ()

    def shutdown(self) -> None:
        return


class BlockIDsLoadStoreSpec(LoadStoreSpec, ABC):
    def __init__(self, block_ids: list[int]):
        self.block_ids = np.array(block_ids, dtype=np.int64)

    def __repr__(self) -> str:
        return repr(self.block_ids)


class GPULoadStoreSpec(BlockIDsLoadStoreSpec):
    """GPU blocks of one transfer, ordered by KV cache group (group_sizes[i] blocks in group i, the
    first being block block_indices[i] of the request)."""

    def __init__(self, block_ids: list[int], group_sizes: Sequence[int], block_indices: Sequence[int]):
        super().__init__(block_ids)
        assert sum(group_sizes) == len(block_ids)
        assert len(block_indices) == len(group_sizes)
        self.group_sizes = group_sizes
        self.block_indices = block_indices

    @staticmethod
    def medium() -> str:
        return "GPU"


@dataclass
class CanonicalKVCacheRef:
    tensor_idx: int
    page_size_bytes: int


# ------------------------------------------------------------------------------------ worker/worker.py

TransferSpec = tuple  # (src LoadStoreSpec, dst LoadStoreSpec)
TransferType = tuple  # (src medium, dst medium)


@dataclass
class TransferResult:
    job_id: int
    success: bool
    transfer_size: int | None = None
    transfer_time: float | None = None
    transfer_type: TransferType | None = None


class OffloadingHandler(ABC):
    """Runs transfers of one (source medium, destination medium) in a worker process."""

    @abstractmethod
    def transfer_async(self, job_id: int, spec: TransferSpec) -> bool:
        """Starts a transfer; False when it could not be submitted."""

    @abstractmethod
    def get_finished(self) -> list[TransferResult]:
        """Transfers finished since the last call."""

    @abstractmethod
    def wait(self, job_ids: set[int]) -> None:
        """Blocks until the given jobs finished."""

    def shutdown(self) -> None:
        return


class OffloadingWorker:
    """The connector's router: each transfer goes to the handler registered for its media."""

    def __init__(self):
        self.handlers: set[OffloadingHandler] = set()
        self.transfer_type_to_handler: dict[TransferType, OffloadingHandler] = {}

    def register_handler(self, src_cls: type, dst_cls: type, handler: OffloadingHandler) -> None:
        transfer_type = (src_cls.medium(), dst_cls.medium())
        assert transfer_type not in self.transfer_type_to_handler
        self.handlers.add(handler)
        self.transfer_type_to_handler[transfer_type] = handler

    def transfer_async(self, job_id: int, spec: TransferSpec) -> bool:
        src, dst = spec
        handler = self.transfer_type_to_handler.get((src.medium(), dst.medium()))
        assert handler is not None
        try:
            return handler.transfer_async(job_id, spec)
        except Exception:  # noqa: BLE001 (vLLM logs it and reports the submission failed)
            return False

    def get_finished(self) -> list[TransferResult]:
        finished = []
        for handler in self.handlers:
            finished.extend(handler.get_finished())
        return finished

    def wait(self, job_ids: set[int]) -> None:
        for handler in self.handlers:
            handler.wait(job_ids)

    def shutdown(self) -> None:
        for handler in self.handlers:
            handler.shutdown()


# ------------------------------------------------------------------------------------ what a spec reads of vLLM's configuration

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 1, "int8": 1, "uint8": 1}


@dataclass
class KVTransferConfig:  # vllm.config.KVTransferConfig
    kv_connector: str | None = None
    engine_id: str | None = None
    kv_role: str | None = None
    kv_connector_extra_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParallelConfig:  # vllm.config.ParallelConfig
    pipeline_parallel_size: int = 1
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    prefill_context_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    rank: int = 0  # the worker's global rank: pp_rank * tensor_parallel_size + tp_rank

    @property
    def world_size(self) -> int:
        return self.pipeline_parallel_size * self.tensor_parallel_size * self.prefill_context_parallel_size


@dataclass
class CacheConfig:  # vllm.config.CacheConfig
    block_size: int = 16


@dataclass
class KVEventsConfig:  # vllm.config.KVEventsConfig
    enable_kv_cache_events: bool = False


@dataclass
class VllmConfig:  # vllm.config.VllmConfig
    kv_transfer_config: KVTransferConfig | None = None
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    kv_events_config: KVEventsConfig | None = None


@dataclass(frozen=True)
class FullAttentionSpec:  # vllm.v1.kv_cache_interface.FullAttentionSpec
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: str

    @property
    def page_size_bytes(self) -> int:
        return 2 * self.block_size * self.num_kv_heads * self.head_size * _DTYPE_BYTES[self.dtype]


@dataclass
class KVCacheTensor:  # vllm.v1.kv_cache_interface.KVCacheTensor
    size: int  # bytes
    shared_by: list[str]


@dataclass
class KVCacheGroupSpec:  # vllm.v1.kv_cache_interface.KVCacheGroupSpec
    layer_names: list[str]
    kv_cache_spec: FullAttentionSpec


@dataclass
class KVCacheConfig:  # vllm.v1.kv_cache_interface.KVCacheConfig
    num_blocks: int
    kv_cache_tensors: list[KVCacheTensor]
    kv_cache_groups: list[KVCacheGroupSpec]


# ------------------------------------------------------------------------------------ the spec


class OffloadingSpec(ABC):
    """What kv_connector_extra_config's spec_name / spec_module_path names, made from the engine's
    configuration in the scheduler process and in every worker process."""

    def __init__(self, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig):
        self.vllm_config = vllm_config
        self.kv_cache_config = kv_cache_config
        kv_transfer_config = vllm_config.kv_transfer_config
        assert kv_transfer_config is not None
        self.extra_config = kv_transfer_config.kv_connector_extra_config
        parallel = vllm_config.parallel_config
        context_parallel_factor = parallel.decode_context_parallel_size * parallel.prefill_context_parallel_size
        self.hash_block_size = vllm_config.cache_config.block_size * context_parallel_factor
        self.gpu_block_size = tuple(group.kv_cache_spec.block_size * context_parallel_factor
                                    for group in kv_cache_config.kv_cache_groups)
        for block_size in self.gpu_block_size:
            assert block_size % self.hash_block_size == 0
        # offloaded block size / GPU block size: vLLM's blocks per offloaded block
        self.block_size_factor = 1
        offloaded_block_size = self.extra_config.get("block_size")
        if offloaded_block_size is not None:
            sizes = set(self.gpu_block_size)
            assert len(sizes) == 1
            gpu_block_size = sizes.pop()
            assert int(offloaded_block_size) % gpu_block_size == 0
            self.block_size_factor = int(offloaded_block_size) // gpu_block_size

    @abstractmethod
    def get_manager(self) -> OffloadingManager:
        """The scheduler side."""

    @abstractmethod
    def get_handlers(self, kv_caches: CanonicalKVCaches) -> Iterator[tuple[type, type, OffloadingHandler]]:
        """A worker process's handlers over its canonical KV caches: (src type, dst type, handler)."""


class OffloadingSpecFactory:
    @classmethod
    def create_spec(cls, vllm_config: VllmConfig, kv_cache_config: KVCacheConfig) -> OffloadingSpec:
        extra_config = vllm_config.kv_transfer_config.kv_connector_extra_config
        spec_name = extra_config.get("spec_name", "CPUOffloadingSpec")
        spec_module_path = extra_config.get("spec_module_path")
        if spec_module_path is None:
            raise ValueError(f"Unsupported spec type: {spec_name}")
        spec_cls = getattr(importlib.import_module(spec_module_path), spec_name)
        assert issubclass(spec_cls, OffloadingSpec)
        return spec_cls(vllm_config, kv_cache_config)
