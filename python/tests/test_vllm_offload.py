"""hugepin.vllm at TP 2 x PP 2 (stage 0 holds twice stage 1's KV), driven as vLLM's OffloadingConnector
drives a spec, on the stand-in of vLLM's current interface (get_worker: submit_store / submit_load),
host memcpy, four rank processes: a new request's lookups miss; prepare_store dispatches a job that
every rank must report (the quorum: one rank's store leaves the blocks pending); get_finished gives
the bytes each rank moved; complete_store makes them readable; a later request hits, prepare_load,
submit_load (whole chunks, and from the middle of a chunk); the cache filled; an eviction whose
chunk a rank still holds (a load vLLM completed early) stores nothing until that rank's copy landed,
and the rank's load still reads the evicted block's data; a rank killed mid-store fails its job,
drops its blocks, stops all offloading until a replacement process attaches, and its chunk comes
back once the process is gone. Every block is checked through torch tensors (vllm_scenarios)."""

import os

os.environ["HUGEPIN_VLLM_STANDIN"] = "current"

import signal  # noqa: E402
import time  # noqa: E402

from vllm_scenarios import SMALL, Connector, Engine, RankProcess, gpu_spec, key, standin  # noqa: E402

import hugepin  # noqa: E402
from hugepin.vllm import HugepinLoadStoreSpec  # noqa: E402

MISS, HIT, PENDING = standin.LookupResult.MISS, standin.LookupResult.HIT, standin.LookupResult.HIT_PENDING
BPC = 2  # GPU blocks per chunk
# One block over all four ranks: 2 x 2048 (stage 0: two layers of K and V, 512 bytes each) + 2 x 1024.
PAYLOAD = 2 * 2048 + 2 * 1024
CHUNKS = 6


def engine(arena: str) -> Engine:
    return Engine(model=SMALL, tp=2, pp=2, blocks_per_chunk=BPC, cpu_bytes=CHUNKS * BPC * PAYLOAD + 1000,
                  engine_id=f"engine-{arena}", extra=(("hugepin_arena", arena), ("hugepin_page_size", "4K")))


def store(connector, names, first_gpu_block, request="r"):
    """The connector's store of keys `names` (GPU blocks from first_gpu_block, BPC per key): every
    rank stamps its blocks, prepare_store, submit on every rank, collect, complete_store."""
    keys = [key(n) for n in names]
    for rank in connector.ranks:
        rank.request({"op": "fill", "keys": [[n, first_gpu_block + BPC * i] for i, n in enumerate(names)]})
    out = connector.manager.prepare_store(keys, connector.context(request))
    assert out is not None and out.keys_to_store == keys
    job = connector.job_id()
    blocks = range(first_gpu_block, first_gpu_block + BPC * len(keys))
    for results in connector.transfer("store", job, gpu_spec(blocks), out.store_spec):
        assert [r[:2] for r in results] == [[job, True]]
    connector.manager.complete_store(keys, connector.context(request))
    return out


def test_the_connectors_sequence_at_tp2_pp2(arena):
    connector = Connector(engine(arena))
    manager = connector.manager
    try:
        # The arena: one chunk count for all four ranks, stage 1's regions half of stage 0's.
        described = [rank.request({"op": "describe"}) for rank in connector.ranks]
        assert [d["segments"] for d in described] == [[512] * 4, [512] * 4, [512] * 2, [512] * 2]
        assert manager.num_blocks == CHUNKS
        # vLLM's CPU sizing counts every rank at rank 0's payload: 4 chunks where the plan fits 6.
        assert connector.spec.num_blocks == (CHUNKS * BPC * PAYLOAD + 1000) // (4 * BPC * 2048) == 4
        assert described[0]["length"] == 2 * described[2]["length"] == CHUNKS * BPC * 2048

        # A new request: nothing offloaded yet.
        context = connector.context("a")
        assert manager.on_new_request(context) == standin.RequestOffloadingContext()
        names = ["a0", "a1", "a2"]
        keys = [key(n) for n in names]
        assert [manager.lookup(k, context) for k in keys] == [MISS] * 3

        # prepare_store: three chunks, one job; stored by rank 0 alone, the blocks stay pending.
        for rank in connector.ranks:
            rank.request({"op": "fill", "keys": [[n, BPC * i] for i, n in enumerate(names)]})
        out = manager.prepare_store(keys, context)
        assert out.keys_to_store == keys and out.evicted_keys == []
        assert isinstance(out.store_spec, HugepinLoadStoreSpec) and len(set(out.store_spec.block_ids)) == 3
        job = connector.job_id()
        src = gpu_spec(range(0, 3 * BPC))
        results = connector.transfer("store", job, src, out.store_spec, ranks=connector.ranks[:1])
        assert [(r[0], r[1], r[2]) for r in results[0]] == [(job, True, 3 * BPC * 2048)]
        assert results[0][0][3] >= 0
        assert [manager.lookup(k, context) for k in keys] == [PENDING] * 3
        assert manager.scheduler.figures().pinned_chunks == 3

        # The other ranks: the quorum is reached, but readable only once vLLM completes the store.
        results = connector.transfer("store", job, src, out.store_spec, ranks=connector.ranks[1:])
        assert [r[0][2] for r in results] == [3 * BPC * 2048, 3 * BPC * 1024, 3 * BPC * 1024]
        assert [manager.lookup(k, context) for k in keys] == [PENDING] * 3
        manager.complete_store(keys, context)
        assert [manager.lookup(k, context) for k in keys] == [HIT] * 3
        assert manager.scheduler.figures().pinned_chunks == 0
        events = list(manager.take_events())
        assert [(e.keys, e.removed, e.medium) for e in events] == [(keys, False, standin.Medium.CPU)]
        chunks = {n: int(c) for n, c in zip(names, out.store_spec.block_ids)}
        for rank in connector.ranks:
            rank.request({"op": "check_host", "keys": [[n, chunks[n]] for n in names]})

        # A later request hits the prefix and loads it: whole chunks into GPU blocks 10.., then
        # from the second block of a0 on (vLLM's block_indices mid-chunk) into GPU blocks 20..22.
        later = connector.context("b")
        manager.on_new_request(later)
        manager.touch(keys + [key("b3")], later)
        assert [manager.lookup(k, later) for k in keys + [key("b3")]] == [HIT, HIT, HIT, MISS]
        for rank in connector.ranks:
            rank.request({"op": "zero", "first": 10, "count": 16})
        load = manager.prepare_load(keys, later)
        assert load.block_ids.tolist() == out.store_spec.block_ids.tolist() and load.job != out.store_spec.job
        job = connector.job_id()
        for results in connector.transfer("load", job, load, gpu_spec(range(10, 16))):
            assert [r[:2] for r in results] == [[job, True]]
        partial = manager.prepare_load(keys[:2], later)
        job = connector.job_id()
        connector.transfer("load", job, partial, gpu_spec(range(20, 23), first_index=1))
        manager.complete_load(keys, later)
        manager.complete_load(keys[:2], later)
        for rank in connector.ranks:
            rank.request({"op": "check_device", "blocks": [[n, 0, 10 + BPC * i, BPC] for i, n in enumerate(names)]})
            rank.request({"op": "check_device", "blocks": [["a0", 1, 20, 1], ["a1", 0, 21, 2]]})

        # The cache filled: three more keys; least recently used first: a2, a1, a0, c3, c4, c5.
        store(connector, ["c3", "c4", "c5"], first_gpu_block=0, request="c")
        assert manager.free_chunks() == 0
        assert [(e.keys, e.removed) for e in manager.take_events()] == [([key("c3"), key("c4"), key("c5")], False)]

        # A load of a2 that rank 3 has not run yet, completed early by vLLM: a2 is evictable, but its
        # chunk is held until rank 3 reports.
        held = manager.prepare_load([key("a2")], later)
        job = connector.job_id()
        connector.transfer("load", job, held, gpu_spec(range(24, 26)), ranks=connector.ranks[:3])
        manager.complete_load([key("a2")], later)
        d6 = key("d6")
        for rank in connector.ranks:
            rank.request({"op": "fill", "keys": [["d6", 0]]})
        assert manager.prepare_store([d6], connector.context("d")) is None  # a2 evicted, its chunk held
        assert manager.lookup(key("a2"), later) == MISS and manager.chunk_of(key("a2")) is None
        assert [(e.keys, e.removed) for e in manager.take_events()] == [([key("a2")], True)]
        assert manager.prepare_store([d6], connector.context("d")) is None  # and nothing more is evicted
        assert manager.lookup(key("a1"), later) == HIT
        assert manager.scheduler.figures().pinned_chunks == 1

        # Rank 3 runs its load now: the chunk was not reused, it still holds a2.
        rank3 = connector.ranks[3]
        rank3.request({"op": "zero", "first": 24, "count": 2})
        assert rank3.submit("load", job, held, gpu_spec(range(24, 26)))
        rank3.finished(wait=[job])
        rank3.request({"op": "check_device", "blocks": [["a2", 0, 24, 2]]})
        out = manager.prepare_store([d6], connector.context("d"))
        assert out.store_spec.block_ids.tolist() == [chunks["a2"]] and out.evicted_keys == []
        job = connector.job_id()
        connector.transfer("store", job, gpu_spec(range(0, BPC)), out.store_spec)
        manager.complete_store([d6], connector.context("d"))
        assert manager.lookup(d6, later) == HIT
        for rank in connector.ranks:
            rank.request({"op": "check_host", "keys": [["d6", chunks["a2"]]]})

        # A rank killed mid-store: rank 1 is stopped, then killed, before it copies job e7; the
        # others copy it.
        e7 = key("e7")
        for rank in connector.ranks:
            rank.request({"op": "fill", "keys": [["e7", 0]]})
        out = manager.prepare_store([e7], connector.context("e"))
        assert out.evicted_keys == [key("a1")]
        job = connector.job_id()
        connector.transfer("store", job, gpu_spec(range(0, BPC)), out.store_spec, ranks=connector.ranks[:1])
        victim = connector.ranks[1]
        os.kill(victim.pid, signal.SIGSTOP)
        victim.send({"op": "store", "job": job, "specs": ""})
        assert manager.lookup(e7, later) == PENDING
        victim.kill()
        connector.transfer("store", job, gpu_spec(range(0, BPC)), out.store_spec, ranks=connector.ranks[2:])
        deadline = time.monotonic() + 20
        while not manager.failed_jobs and time.monotonic() < deadline:
            manager.on_schedule_end(None)
            time.sleep(0.01)
        [failed] = manager.failed_jobs
        assert (failed.job, failed.rank, failed.cause) == \
            (out.store_spec.job, 1, hugepin.FailureCause.RANK_UNRESPONSIVE)
        assert manager.lookup(e7, later) == MISS and manager.chunk_of(e7) is None
        assert manager.lookup(key("c3"), later) == MISS  # nothing can be loaded without rank 1
        assert manager.prepare_store([key("f8")], connector.context("f")) is None
        deadline = time.monotonic() + 20  # the process is gone, the others reported: the chunk comes back
        while manager.free_chunks() == 0 and time.monotonic() < deadline:
            manager.on_schedule_end(None)
            time.sleep(0.01)
        assert manager.free_chunks() == 1

        # A replacement process for rank 1 attaches; offloading resumes.
        connector.ranks[1] = RankProcess(connector.engine, 1).started()
        connector.wait_attached()
        assert manager.lookup(key("c3"), later) == HIT
        out = store(connector, ["f8"], first_gpu_block=4, request="f")
        assert manager.lookup(key("f8"), later) == HIT
        for rank in connector.ranks:
            rank.request({"op": "check_host", "keys": [["f8", int(out.store_spec.block_ids[0])],
                                                       ["c3", manager.chunk_of(key("c3"))]]})
            rank.request({"op": "check_device", "blocks": [["f8", 0, 4, BPC]]})
    finally:
        codes = connector.close()
    assert codes == [0, 0, 0, 0]
    try:
        hugepin.arena_info(arena)
    except hugepin.NotFoundError:
        pass
    else:
        raise AssertionError("the manager's shutdown left the arena")
