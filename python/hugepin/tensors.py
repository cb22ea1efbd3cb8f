"""PyTorch helpers: tensors over a rank's region, device KV segments from the engine's tensors, and
planner entries from KV tensors. Importing this module imports torch; the rest of the package never
does (Worker.host_tensor, Worker.set_device_kv with tensors and Plan.from_tensors import it on use).
Works with torch 1.13 (Debian 12) and 2.x.
"""

from __future__ import annotations

import math

import torch

from hugepin.errors import InvalidArgumentError
from hugepin.worker import Backend, DeviceSegment


def _itemsize(dtype) -> int:
    if not isinstance(dtype, torch.dtype):
        raise InvalidArgumentError(f"dtype = {dtype!r}: not a torch.dtype")
    return torch.empty((), dtype=dtype).element_size()


def _shape(shape) -> tuple:
    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"shape = {shape!r}: not a sequence of sizes") from None
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"shape = {shape!r}: negative size")
    return dims


def host_tensor(worker, segment: int | None = None, dtype=None, shape=None) -> torch.Tensor:
    """A CPU tensor of `dtype` (default torch.uint8) over `worker`'s region, no copy.

    segment None: the whole region, shape (region.length / itemsize,) or any `shape` of exactly
    that many bytes. segment i: that KV segment, shape (host_blocks, bytes_per_block / itemsize) or
    any `shape` whose first dimension is host_blocks and whose other dimensions hold one block's
    bytes: row h is host block h (chunk * blocks_per_chunk + b). Once the worker pinned its region,
    tensor.is_pinned() is True. InvalidArgumentError names a dtype or shape that does not fit."""
    dtype = torch.uint8 if dtype is None else dtype
    itemsize = _itemsize(dtype)
    if worker.region.pinned and torch.cuda.is_available():
        # Until torch's own CUDA state is initialized it answers is_pinned() False for registered
        # memory (seen with torch 2.11 on the H200 host), and code that checks it (pin_memory(),
        # an engine asserting pinned buffers) would copy the region or refuse it.
        torch.cuda.init()
    if segment is None:
        buffer = worker.buffer()
        nbytes = len(buffer)
        dims = (nbytes // itemsize,) if shape is None else _shape(shape)
        if math.prod(dims) * itemsize != nbytes:
            raise InvalidArgumentError(f"shape {dims} of {dtype} is {math.prod(dims) * itemsize} bytes; the region "
                                       f"of rank {worker.rank} holds {nbytes}")
        return torch.frombuffer(buffer, dtype=dtype).view(dims)
    info = worker.segment(segment)
    block, stride = info.bytes_per_block, info.host_block_stride
    if block % itemsize != 0 or stride % itemsize != 0:
        raise InvalidArgumentError(f"dtype {dtype} ({itemsize} bytes) does not divide segment {segment}'s blocks "
                                   f"({block} bytes every {stride})")
    dims = (info.host_blocks, block // itemsize) if shape is None else _shape(shape)
    if len(dims) < 1 or dims[0] != info.host_blocks or math.prod(dims[1:]) * itemsize != block:
        raise InvalidArgumentError(f"shape {dims} of {dtype} does not fit segment {segment} of rank {worker.rank}: "
                                   f"({info.host_blocks}, ...) with {block} bytes per block")
    flat = torch.frombuffer(worker.buffer(segment), dtype=dtype)
    inner = [1] * len(dims)
    for i in range(len(dims) - 2, 0, -1):
        inner[i] = inner[i + 1] * dims[i + 1]
    inner[0] = stride // itemsize
    return flat.as_strided(dims, inner)


def device_segment(tensor: torch.Tensor, what: str = "tensor") -> DeviceSegment:
    """The DeviceSegment of `tensor`, whose first dimension indexes blocks and whose other
    dimensions hold one block, densely (a FlashAttention layer's kv[0] and kv[1], a block-major
    layer whole). InvalidArgumentError names a tensor without blocks or with a block not contiguous."""
    if not isinstance(tensor, torch.Tensor):
        raise InvalidArgumentError(f"{what} is a {type(tensor).__name__}: not a torch.Tensor")
    if tensor.dim() < 1 or tensor.shape[0] == 0:
        raise InvalidArgumentError(f"{what} has shape {tuple(tensor.shape)}: its first dimension must index blocks")
    if not tensor[0].is_contiguous():
        raise InvalidArgumentError(f"{what} has strides {tensor.stride()} for shape {tuple(tensor.shape)}: one block "
                                   "(every dimension but the first) must be contiguous")
    itemsize = tensor.element_size()
    bytes_per_block = tensor[0].numel() * itemsize
    return DeviceSegment(tensor.data_ptr(), tensor.stride(0) * itemsize if tensor.shape[0] > 1 else bytes_per_block,
                         tensor.shape[0], bytes_per_block)


def check_device(tensor: torch.Tensor, backend: Backend, pinned_device: int, what: str) -> None:
    """Refuses a tensor the backend cannot copy: a CPU tensor for the GPU, a CUDA tensor (or any
    other device) for host memcpy, a CUDA tensor of another GPU than the region is pinned for."""
    device = tensor.device
    if backend == Backend.HOST and device.type != "cpu":
        raise InvalidArgumentError(f"{what} is on {device}: the host backend copies CPU tensors (pin the region "
                                   "and use the GPU backend for CUDA tensors)")
    if backend == Backend.GPU:
        if device.type != "cuda":
            raise InvalidArgumentError(f"{what} is on {device}: the GPU backend copies CUDA tensors")
        if pinned_device >= 0 and device.index != pinned_device:
            raise InvalidArgumentError(f"{what} is on {device}: the region is pinned for cuda:{pinned_device}")


def _storage(tensor: torch.Tensor):
    """(identity, bytes) of the storage under `tensor` (torch 2.x untyped_storage, 1.13 storage)."""
    storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()
    return storage._cdata, storage.nbytes()


def describe_kv(tensors, num_blocks: int, *, tp_rank: int = 0, pp_rank: int = 0, groups: dict | None = None,
                gpu_pci: str | None = None) -> dict:
    """One rank's entry of the planner input (docs/planner.md) from its KV tensors, a dict of
    name -> tensor: shape, strides, element size, and which tensors share a storage (named after the
    first tensor on it) with its size. JSON-serializable: a worker can send it to the scheduler.
    `groups` maps a tensor name to its KV cache group; `gpu_pci` is the rank GPU's PCI address
    (its NUMA node places the region)."""
    if not isinstance(tensors, dict) or not tensors:
        raise InvalidArgumentError(f"tensors of rank ({tp_rank}, {pp_rank}): give a non-empty dict of name -> tensor")
    storages = {}
    described = []
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise InvalidArgumentError(f"tensors[{name!r}] is a {type(tensor).__name__}: not a torch.Tensor")
        identity, nbytes = _storage(tensor)
        storage = storages.setdefault((tensor.device, identity), name)
        if storage == name and tensor.storage_offset() != 0:
            raise InvalidArgumentError(f"tensors[{name!r}] starts at element {tensor.storage_offset()} of its storage: "
                                       "give each layer's KV tensor whole, as the engine allocated it")
        entry = {"name": name, "shape": list(tensor.shape), "strides": list(tensor.stride()),
                 "element_size": tensor.element_size(), "storage": storage, "storage_bytes": nbytes}
        if groups and name in groups:
            entry["group"] = groups[name]
        described.append(entry)
    rank = {"tp_rank": tp_rank, "pp_rank": pp_rank, "num_blocks": num_blocks, "tensors": described}
    if gpu_pci is not None:
        rank["gpu_pci"] = gpu_pci
    return rank
