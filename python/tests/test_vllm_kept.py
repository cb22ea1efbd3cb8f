"""hugepin.vllm with hugepin_daemon_socket: an arena that outlives the engine. A stand-in hugepind
answers `status` on a socket of the test's own. Engine 1 (TP 1 x PP 2) stores two blocks and shuts
down: the arena stays, with the manager's index beside it. Engine 2, same engine id and layout, in
new processes, adopts the arena: its lookups hit the blocks engine 1 stored, and its load brings
engine 1's data to the new processes' GPU blocks. Engine 3, of another layout (chunks of another
size), replaces the arena: nothing of engine 1 is found."""

import json
import os
import shutil
import tempfile

os.environ["HUGEPIN_VLLM_STANDIN"] = "current"

from vllm_scenarios import SMALL, Connector, Engine, FakeDaemon, gpu_spec, key, standin  # noqa: E402

import hugepin  # noqa: E402

HIT, MISS = standin.LookupResult.HIT, standin.LookupResult.MISS


def engine(folder: str, blocks_per_chunk: int = 2) -> Engine:
    return Engine(model=SMALL, tp=1, pp=2, blocks_per_chunk=blocks_per_chunk, cpu_bytes=8 * 2 * (2048 + 1024),
                  engine_id=f"kept-{os.getpid()}",
                  extra=(("hugepin_page_size", "4K"), ("hugepin_daemon_socket", os.path.join(folder, "hugepind.sock")),
                         ("hugepin_rendezvous_dir", folder)))


def test_a_kept_arena_and_its_blocks_outlive_the_engine():
    folder = tempfile.mkdtemp(prefix="hugepin-vllm-kept-")
    daemon = FakeDaemon(os.path.join(folder, "hugepind.sock"))
    name = f"vllm-kept-{os.getpid()}"
    try:
        names = ["k0", "k1"]
        keys = [key(n) for n in names]
        first = Connector(engine(folder))
        try:
            for rank in first.ranks:
                rank.request({"op": "fill", "keys": [[n, 2 * i] for i, n in enumerate(names)]})
            out = first.manager.prepare_store(keys, first.context("a"))
            first.transfer("store", first.job_id(), gpu_spec(range(4)), out.store_spec)
            first.manager.complete_store(keys, first.context("a"))
            assert [first.manager.lookup(k, first.context("a")) for k in keys] == [HIT, HIT]
        finally:
            assert first.close() == [0, 0]
        assert daemon.requests == [{"version": 1, "op": "status"}]
        assert hugepin.arena_info(name).chunk_count == 8  # kept
        with open(os.path.join(folder, f"hugepin-vllm.{name}", "index.json")) as index:
            assert len(json.load(index)["blocks"]) == 2

        second = Connector(engine(folder))  # new processes, same engine id and layout
        try:
            context = second.context("b")
            assert [second.manager.lookup(k, context) for k in keys] == [HIT, HIT]
            assert [c for _, c in second.manager.stored()] == out.store_spec.block_ids.tolist()
            load = second.manager.prepare_load(keys, context)
            second.transfer("load", second.job_id(), load, gpu_spec(range(10, 14)))
            second.manager.complete_load(keys, context)
            for rank in second.ranks:  # these processes never stamped k0 and k1: the arena kept them
                rank.request({"op": "check_device", "blocks": [["k0", 0, 10, 2], ["k1", 0, 12, 2]]})
            assert second.manager.free_chunks() == 6
        finally:
            assert second.close() == [0, 0]

        third = Connector(engine(folder, blocks_per_chunk=4))  # another layout: the arena is replaced
        try:
            assert [third.manager.lookup(k, third.context("c")) for k in keys] == [MISS, MISS]
            assert third.manager.num_blocks == 4 and third.manager.free_chunks() == 4
        finally:
            assert third.close() == [0, 0]
    finally:
        daemon.close()
        try:
            hugepin.destroy_arena(name)
        except hugepin.NotFoundError:
            pass
        shutil.rmtree(folder, ignore_errors=True)
