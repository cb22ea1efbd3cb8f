"""The scheduler process's arena: planned from every rank's KV, created (or adopted when kept for
restarts), published to the ranks, and its index of stored blocks kept across engines.

    scheduler, stored, fingerprint = open_arena(name, layout, options, rendezvous)

The plan: tp x pp ranks, each with its own KV segments (pipeline stages may hold different
payloads), blocks_per_chunk GPU blocks per chunk, and the user's cpu_bytes_to_use for all ranks:
chunk_count = floor(cpu_bytes / (blocks_per_chunk * sum of the ranks' payloads per block)), which
is vLLM's CPU sizing when the ranks hold equal payloads.

Kept arenas (hugepin_daemon_socket): the arena is created with keep_arena, so that it outlives this
engine; arena.json records the plan's fingerprint, and at shutdown index.json records which block
(key) lives in which chunk. The next engine of the same arena name adopts the arena when its plan
has the same fingerprint (and takes the index when its fingerprint matches too); otherwise it
destroys the arena and creates one for its own plan.
"""

from __future__ import annotations

import logging
import os

import hugepin
from hugepin.vllm import daemon
from hugepin.vllm.rendezvous import _alive

logger = logging.getLogger("hugepin.vllm")


def planner_input(layout, options, entries: list) -> dict:
    """The planner's input (docs/planner.md) for the ranks' entries."""
    request = {"tp": layout.tp, "pp": layout.pp, "blocks_per_chunk": layout.blocks_per_chunk,
               "cpu_bytes": options.cpu_bytes, "ranks": entries}
    if options.page_size:
        request["page_size"] = options.page_size
    return request


def fingerprint(plan: hugepin.Plan) -> dict:
    """What must be equal for an engine to reuse an arena and its contents: ranks, chunking, and each
    rank's KV segments."""
    planned = plan.to_dict()
    ranks = [[rank["payload_bytes_per_block"],
              [[storage["segments"], storage["segment_bytes_per_block"]] for storage in rank["storages"]]]
             for rank in planned["ranks"]]
    return {"tp": planned["tp"], "pp": planned["pp"], "blocks_per_chunk": planned["blocks_per_chunk"],
            "chunk_count": planned["chunk_count"], "ranks": ranks}


def open_arena(name: str, layout, options, rendezvous):
    """(scheduler, stored (key, chunk) pairs, fingerprint) for arena `name`, once every rank's KV
    layout is in `rendezvous`; then publishes the arena to the ranks (arena.json)."""
    entries = rendezvous.collect_ranks(layout.ranks, options.rendezvous_timeout)
    plan = hugepin.Plan.from_dict(planner_input(layout, options, entries))
    printed = fingerprint(plan)
    keep = options.daemon_socket is not None
    opened = None
    if keep:
        daemon.check_looks_after(options.daemon_socket, name)
        opened = _adopt(name, printed, rendezvous)
    if opened is None:
        opened = _create(name, plan, options, keep), []
    scheduler, stored = opened
    rendezvous.write("arena.json", {"pid": os.getpid(), "arena": name, "fingerprint": printed})
    info = plan.info
    logger.info("hugepin.vllm: arena '%s' (%s): %d chunks of %d blocks for tp %d x pp %d, %d bytes per block over "
                "all ranks, %d stored blocks adopted", name, "kept" if keep else "embedded", info.chunk_count,
                info.blocks_per_chunk, info.tp, info.pp, info.payload_bytes_per_block, len(stored))
    return scheduler, stored, printed


def _create(name: str, plan: hugepin.Plan, options, keep: bool) -> hugepin.Scheduler:
    settings = dict(page_size=options.page_size or 0, strict=options.strict, waive_compute_barrier=True,
                    keep_arena=keep)
    try:
        return hugepin.Scheduler.create(name, plan, **settings)
    except hugepin.ExistsError:
        creator = hugepin.arena_info(name).creator_pid
        if _alive(creator):
            raise hugepin.ExistsError(f"arena '{name}' exists and its creator (pid {creator}) runs: another engine "
                                      "uses this name; set hugepin_arena") from None
        logger.warning("hugepin.vllm: arena '%s' was left by pid %d, which is gone: replacing it", name, creator)
        hugepin.destroy_arena(name)
        return hugepin.Scheduler.create(name, plan, **settings)


def _adopt(name: str, printed: dict, rendezvous):
    """(scheduler, stored) of the kept arena `name` when it was made for the same plan, else None
    (an arena of another plan is destroyed)."""
    try:
        hugepin.arena_info(name)
    except hugepin.NotFoundError:
        return None
    published = rendezvous.read("arena.json") or {}
    if published.get("fingerprint") != printed:
        logger.warning("hugepin.vllm: kept arena '%s' was made for another layout: destroyed, a new one is made", name)
        hugepin.destroy_arena(name)
        rendezvous.remove("index.json")
        return None
    scheduler = hugepin.Scheduler.adopt(name, waive_compute_barrier=True)
    index = rendezvous.read("index.json")
    rendezvous.remove("index.json")  # from now on the new manager's state is the truth
    return scheduler, _stored_blocks(index, printed, name)


def _stored_blocks(index, printed: dict, name: str) -> list:
    if not index:
        return []
    blocks = index.get("blocks")
    chunks = [entry[1] for entry in blocks] if isinstance(blocks, list) else []
    valid = (index.get("fingerprint") == printed and isinstance(blocks, list)
             and all(isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) for entry in blocks)
             and all(isinstance(chunk, int) and 0 <= chunk < printed["chunk_count"] for chunk in chunks)
             and len(set(chunks)) == len(chunks))
    if not valid:
        logger.warning("hugepin.vllm: the index of kept arena '%s' does not fit it: its blocks are not reused", name)
        return []
    try:
        return [(bytes.fromhex(key), chunk) for key, chunk in blocks]
    except ValueError:
        logger.warning("hugepin.vllm: the index of kept arena '%s' holds a key that is not hex: not reused", name)
        return []


def save_index(rendezvous, manager, printed: dict) -> None:
    """index.json: the manager's readable blocks (bytes keys), least recently used first."""
    blocks = [[key.hex(), chunk] for key, chunk in manager.stored() if isinstance(key, (bytes, bytearray))]
    rendezvous.write("index.json", {"fingerprint": printed, "blocks": blocks})
