"""Capacity plans: from the engine's KV layout to one chunk count and each rank's region.

A plan is made from the planner's input (docs/planner.md: tp, pp, blocks_per_chunk, cpu_bytes and
each rank's KV tensors or bytes_per_block), given as a dict, as JSON text, or as torch tensors
(Plan.from_tensors). It is planned on this host: its hugepage pool and the NUMA node of each
rank's GPU.
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass

from hugepin import _abi
from hugepin.errors import InvalidArgumentError


@dataclass(frozen=True)
class PlanInfo:
    """What a plan decided: one chunk count for all tp x pp ranks, the page size, and the bytes per
    block and of the regions over all ranks."""
    tp: int
    pp: int
    chunk_count: int
    blocks_per_chunk: int
    page_size: int
    payload_bytes_per_block: int
    region_bytes: int


class Plan:
    """A capacity plan (hugepin_plan). Make one with from_dict, from_json or from_tensors; pass it
    to Scheduler.create or create_arena. Owns its library handle, freed with the object."""

    def __init__(self, handle: ctypes.c_void_p):
        """Internal: use the from_* constructors."""
        self._handle = handle

    @classmethod
    def from_json(cls, text) -> Plan:
        """Plans the planner input `text` (str or bytes). InvalidArgumentError names the JSON path at
        fault for malformed or invalid input."""
        if isinstance(text, str):
            text = text.encode()
        if not isinstance(text, (bytes, bytearray)):
            raise InvalidArgumentError(f"plan JSON is a {type(text).__name__}: give str or bytes")
        handle = ctypes.c_void_p()
        _abi.check(_abi.lib.hugepin_plan_from_json(bytes(text), len(text), ctypes.byref(handle)))
        return cls(handle)

    @classmethod
    def from_dict(cls, planner_input: dict) -> Plan:
        """Plans the planner input given as a dict (what json.loads makes of the JSON form)."""
        if not isinstance(planner_input, dict):
            raise InvalidArgumentError(f"planner input is a {type(planner_input).__name__}: give a dict")
        try:
            text = json.dumps(planner_input)
        except (TypeError, ValueError) as error:
            raise InvalidArgumentError(f"planner input is not JSON: {error}") from None
        return cls.from_json(text)

    @classmethod
    def from_tensors(cls, *, tp: int, pp: int, blocks_per_chunk: int, cpu_bytes: int, ranks: dict,
                     page_size: str | None = None) -> Plan:
        """Plans from each rank's KV tensors. `ranks` maps (tp_rank, pp_rank) to (num_blocks,
        tensors), `tensors` a dict of name -> torch.Tensor (each layer's KV tensor as the engine
        allocated it; meta tensors do: only shapes, strides, element sizes and shared storages are
        read). See hugepin.tensors.describe_kv for what each rank's entry holds."""
        from hugepin import tensors  # torch: only here

        entries = []
        for key, value in ranks.items():
            try:
                (tp_rank, pp_rank), (num_blocks, kv) = key, value
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"ranks[{key!r}]: give (tp_rank, pp_rank): (num_blocks, tensors)") from None
            entries.append(tensors.describe_kv(kv, num_blocks, tp_rank=tp_rank, pp_rank=pp_rank))
        planner_input = {"tp": tp, "pp": pp, "blocks_per_chunk": blocks_per_chunk, "cpu_bytes": cpu_bytes,
                         "ranks": entries}
        if page_size is not None:
            planner_input["page_size"] = page_size
        return cls.from_dict(planner_input)

    @property
    def info(self) -> PlanInfo:
        out = _abi.PlanInfo()
        _abi.check(_abi.lib.hugepin_plan_get_info(self._handle, ctypes.byref(out)))
        return PlanInfo(**_abi.fields(out))

    def to_json(self) -> str:
        """The plan as `hugepin plan --json` prints it."""
        length = ctypes.c_size_t()
        _abi.lib.hugepin_plan_to_json(self._handle, None, 0, ctypes.byref(length))  # -ENOSPC, sets length
        buffer = ctypes.create_string_buffer(length.value + 1)
        _abi.check(_abi.lib.hugepin_plan_to_json(self._handle, buffer, len(buffer), ctypes.byref(length)))
        return buffer.value.decode()

    def to_dict(self) -> dict:
        return json.loads(self.to_json())

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            _abi.lib.hugepin_plan_free(handle)

    def __repr__(self) -> str:
        info = self.info
        return (f"<hugepin.Plan tp {info.tp} x pp {info.pp}, {info.chunk_count} chunks of "
                f"{info.blocks_per_chunk} blocks, page size {info.page_size}>")
