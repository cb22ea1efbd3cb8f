"""hugepin.vllm's parts in one process: the configuration keys (each bad one refused by name), arena
names from engine ids, the layout read from either constructor, an installed vllm package used and
its generation found (fake packages), the rendezvous folder refusing planted files, the hugepind
status question, block pairs from vLLM's specs, a rank shut down early, and the manager over a
one-rank arena whose worker lives in this process (vLLM's LRU order, touch, eviction, a store that
fails at one rank, errors naming the key)."""

import errno
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

os.environ["HUGEPIN_VLLM_STANDIN"] = "current"

import numpy  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from vllm_scenarios import SMALL, Engine, FakeDaemon, gpu_spec, key, standin  # noqa: E402

import hugepin  # noqa: E402
from hugepin.vllm import HugepinLoadStoreSpec, HugepinOffloadingManager, daemon  # noqa: E402
from hugepin.vllm.layout import EngineLayout, arena_name  # noqa: E402
from hugepin.vllm.options import OPTIONS, Options  # noqa: E402
from hugepin.vllm.rendezvous import Rendezvous  # noqa: E402
from hugepin.vllm.worker import RankCopier  # noqa: E402

HIT, MISS, PENDING = standin.LookupResult.HIT, standin.LookupResult.MISS, standin.LookupResult.HIT_PENDING


def refused(kind, call, *fragments):
    with pytest.raises(kind) as caught:
        call()
    for fragment in fragments:
        assert fragment in str(caught.value), (fragment, str(caught.value))


# ------------------------------------------------------------------------------------ configuration


def test_options_have_defaults_and_parse_every_key():
    options = Options.parse({"cpu_bytes_to_use": 6.4e10, "spec_name": "HugepinOffloadingSpec"})
    assert options.cpu_bytes == 64000000000  # a float is truncated, as vLLM's int() does
    assert (options.arena, options.page_size, options.strict, options.daemon_socket) == (None, None, False, None)
    assert (options.rendezvous_dir, options.rendezvous_timeout, options.time_copies) == ("/dev/shm", 300.0, False)
    options = Options.parse({"cpu_bytes_to_use": "4096", "hugepin_arena": "kv-1", "hugepin_page_size": "2m",
                             "hugepin_strict": "yes", "hugepin_daemon_socket": "/run/hugepin/hugepind.sock",
                             "hugepin_rendezvous_timeout": 5, "hugepin_time_copies": True,
                             "hugepin_copy_threads": 2})
    assert (options.cpu_bytes, options.arena, options.page_size, options.strict) == (4096, "kv-1", "2M", True)
    assert (options.daemon_socket, options.rendezvous_timeout, options.time_copies, options.copy_threads) == \
        ("/run/hugepin/hugepind.sock", 5.0, True, 2)
    assert all(option.key.startswith("hugepin_") and option.meaning for option in OPTIONS)


@pytest.mark.parametrize("config, fragments", [
    ({}, ["'cpu_bytes_to_use'", "missing"]),
    ({"cpu_bytes_to_use": 0}, ["'cpu_bytes_to_use'", "= 0"]),
    ({"cpu_bytes_to_use": "lots"}, ["'lots'"]),
    ({"cpu_bytes_to_use": 1, "hugepin_arnea": "kv"}, ["'hugepin_arnea'", "not a hugepin.vllm key"]),
    ({"cpu_bytes_to_use": 1, "hugepin_arena": "../etc"}, ["'hugepin_arena'", "'../etc'"]),
    ({"cpu_bytes_to_use": 1, "hugepin_page_size": "3M"}, ["'hugepin_page_size'", "'3M'"]),
    ({"cpu_bytes_to_use": 1, "hugepin_strict": "maybe"}, ["'hugepin_strict'", "'maybe'"]),
    ({"cpu_bytes_to_use": 1, "hugepin_rendezvous_timeout": -1}, ["'hugepin_rendezvous_timeout'", "-1"]),
    ({"cpu_bytes_to_use": 1, "hugepin_copy_threads": 1.5}, ["'hugepin_copy_threads'", "1.5"]),
    ({"cpu_bytes_to_use": 1, "hugepin_daemon_socket": ""}, ["'hugepin_daemon_socket'"]),
])
def test_a_bad_key_is_refused_by_name(config, fragments):
    refused(hugepin.InvalidArgumentError, lambda: Options.parse(config), *fragments)


def test_arena_names_come_from_the_engine_id_and_never_collide():
    assert arena_name("3f2a9c10-77aa-4c1e-9d2b-0a1b2c3d4e5f") == "vllm-3f2a9c10-77aa-4c1e-9d2b-0a1b2c3d4e5f"
    spelled = {arena_name("engine/0"), arena_name("engine:0"), arena_name("engine-0")}
    assert len(spelled) == 3 and all(len(name) <= 64 for name in spelled)
    long_names = {arena_name("x" * 100 + suffix) for suffix in "ab"}
    assert len(long_names) == 2 and all(len(name) == 64 for name in long_names)
    refused(hugepin.InvalidArgumentError, lambda: arena_name(""), "engine_id", "hugepin_arena")


def test_the_layout_reads_either_constructor_and_refuses_context_parallelism():
    spec_config = Engine(model=SMALL, tp=2, pp=2, blocks_per_chunk=4, cpu_bytes=1 << 20,
                         engine_id="e").spec_arguments(3)[0]
    holder = type("Spec", (), {"config": spec_config})()
    layout = EngineLayout.of(holder)
    assert (layout.engine_id, layout.tp, layout.pp, layout.rank, layout.ranks) == ("e", 2, 2, 3, 4)
    assert (layout.blocks_per_chunk, layout.worker_kv_bytes_per_block) == (4, 1024)
    assert layout.estimated_chunks(1 << 20) == (1 << 20) // (1024 * 4 * 4)

    legacy = standin_handlers()
    vllm_config = legacy.VllmConfig(kv_transfer_config=legacy.KVTransferConfig(engine_id="old"),
                                    parallel_config=legacy.ParallelConfig(pipeline_parallel_size=2,
                                                                          tensor_parallel_size=4, rank=5))
    attention = legacy.FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=8, dtype="bfloat16")
    kv_cache_config = legacy.KVCacheConfig(num_blocks=10, kv_cache_tensors=[legacy.KVCacheTensor(5120, ["l0"])] * 3,
                                           kv_cache_groups=[legacy.KVCacheGroupSpec(["l0"], attention)])
    holder = type("Spec", (), {"vllm_config": vllm_config, "kv_cache_config": kv_cache_config,
                               "block_size_factor": 2})()
    layout = EngineLayout.of(holder)
    assert (layout.engine_id, layout.tp, layout.pp, layout.rank, layout.blocks_per_chunk) == ("old", 4, 2, 5, 2)
    assert layout.worker_kv_bytes_per_block == 3 * 5120 // 10 and not layout.events

    vllm_config.parallel_config.decode_context_parallel_size = 2
    refused(hugepin.InvalidArgumentError, lambda: EngineLayout.of(holder), "decode context parallel size 2")


def standin_handlers():
    import importlib

    return importlib.import_module("hugepin.vllm.standin.handlers")


FAKE_VLLM = {  # a vllm package's offloading modules per generation, made of the stand-in's classes
    "current": {"vllm/v1/kv_offload/base.py": "from hugepin.vllm.standin.current import *\n"},
    "handlers": {"vllm/v1/kv_offload/base.py": "from hugepin.vllm.standin.handlers import *\n",
                 "vllm/v1/kv_offload/worker/worker.py":
                     "from hugepin.vllm.standin.handlers import OffloadingHandler, TransferResult\n"},
    "earliest": {"vllm/v1/kv_offload/abstract.py": "\n"},
}


@pytest.mark.parametrize("generation", sorted(FAKE_VLLM))
def test_an_installed_vllm_is_used_and_its_generation_found(generation, folder):
    for path, text in FAKE_VLLM[generation].items():
        os.makedirs(os.path.join(folder, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(folder, path), "w") as module:
            module.write(text)
    with open(os.path.join(folder, "vllm", "__init__.py"), "w") as package:
        package.write("__version__ = '0.0.0-fake'\n")
    environment = {k: v for k, v in os.environ.items() if k != "HUGEPIN_VLLM_STANDIN"}
    environment["PYTHONPATH"] = os.pathsep.join([folder, os.environ["PYTHONPATH"]])
    code = "import hugepin.vllm as v, hugepin.vllm.interface as i; print(v.GENERATION, i.SOURCE.split(' (')[0])"
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60)
    if generation == "earliest":
        assert done.returncode != 0
        assert "vLLM 0.0.0-fake has no vllm.v1.kv_offload.base" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [generation, "vllm", "0.0.0-fake"]  # vLLM's modules, not the stand-in


# ------------------------------------------------------------------------------------ rendezvous and hugepind


@pytest.fixture
def folder():
    path = tempfile.mkdtemp(prefix="hugepin-vllm-units-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_rendezvous_refuses_planted_files_and_folders(folder):
    rendezvous = Rendezvous(folder, "kv")
    assert oct(os.stat(rendezvous.path).st_mode & 0o777) == "0o700"
    rendezvous.publish_rank(0, {"tp_rank": 0})
    assert rendezvous.read("rank-0.json") == {"pid": os.getpid(), "entry": {"tp_rank": 0}}
    assert rendezvous.read("rank-1.json") is None

    os.symlink(os.path.join(rendezvous.path, "rank-0.json"), os.path.join(rendezvous.path, "rank-1.json"))
    refused(hugepin.PermissionDeniedError, lambda: rendezvous.read("rank-1.json"), "rank-1.json", "symbolic link")
    open_to_all = os.path.join(rendezvous.path, "rank-2.json")
    with open(open_to_all, "w") as planted:
        planted.write("{}")
    os.chmod(open_to_all, 0o666)
    refused(hugepin.PermissionDeniedError, lambda: rendezvous.read("rank-2.json"), "rank-2.json", "0666")
    os.mkdir(os.path.join(rendezvous.path, "rank-3.json"))
    refused(hugepin.PermissionDeniedError, lambda: rendezvous.read("rank-3.json"), "not a regular file")
    with open(os.path.join(rendezvous.path, "index.json"), "w") as broken:
        broken.write("{not json")
    refused(hugepin.InvalidArgumentError, lambda: rendezvous.read("index.json"), "index.json", "not JSON")

    os.chmod(rendezvous.path, 0o777)
    refused(hugepin.PermissionDeniedError, lambda: Rendezvous(folder, "kv"), "writable by others", "0777")
    os.symlink(rendezvous.path, os.path.join(folder, "hugepin-vllm.linked"))
    refused(hugepin.PermissionDeniedError, lambda: Rendezvous(folder, "linked"), "not a folder")


def test_collecting_ranks_waits_for_live_processes_and_names_the_missing(folder):
    rendezvous = Rendezvous(folder, "kv")
    rendezvous.publish_rank(0, {"tp_rank": 0})
    rendezvous.write("rank-1.json", {"pid": 2 ** 22 + 12345, "entry": {"tp_rank": 1}})  # no such process
    refused(hugepin.TimedOutError, lambda: rendezvous.collect_ranks(3, 0.05), "rank(s) [1, 2] of 3")
    rendezvous.publish_rank(1, {"tp_rank": 1})
    rendezvous.publish_rank(2, {"tp_rank": 2})
    assert rendezvous.collect_ranks(3, 0.05) == [{"tp_rank": 0}, {"tp_rank": 1}, {"tp_rank": 2}]
    rendezvous.remove_all()
    assert not os.path.exists(rendezvous.path)


def test_the_daemon_question(folder):
    path = os.path.join(folder, "hugepind.sock")
    refused(hugepin.NotFoundError, lambda: daemon.status(path), repr(path), "no hugepind answers")
    fake = FakeDaemon(path, prefix="vllm-")
    try:
        assert daemon.check_looks_after(path, "vllm-e1")["ok"]
        refused(hugepin.InvalidArgumentError, lambda: daemon.check_looks_after(path, "kv"), "'kv'", "'vllm-'")
    finally:
        fake.close()
    os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    try:
        def refuse():
            connection, _ = listener.accept()
            with connection:
                connection.makefile().readline()
                connection.sendall(b'{"version": 1, "ok": false, "error": "status is refused for uid 1000"}\n')

        threading.Thread(target=refuse, daemon=True).start()
        refused(hugepin.Error, lambda: daemon.status(path), "status refused", "uid 1000")
    finally:
        listener.close()


# ------------------------------------------------------------------------------------ block pairs


def copier_with(blocks_per_chunk: int) -> RankCopier:
    copier = RankCopier.__new__(RankCopier)
    copier.blocks_per_chunk = blocks_per_chunk
    return copier


def test_gpu_blocks_pair_with_the_chunks_blocks_in_order():
    copier = copier_with(4)
    host = HugepinLoadStoreSpec([7, 2], job=3)
    pairs = copier._pairs(gpu_spec([10, 11, 12, 13, 20, 21, 22, 23]), host, store=True)
    assert pairs.tolist() == [[10, 28], [11, 29], [12, 30], [13, 31], [20, 8], [21, 9], [22, 10], [23, 11]]
    assert pairs.dtype == numpy.int64 and pairs.flags.c_contiguous
    # A load starting at block 6 of the request: block 2 of the first chunk on, into GPU blocks 40..44.
    pairs = copier._pairs(gpu_spec([40, 41, 42, 43, 44], first_index=6), host, store=False)
    assert pairs.tolist() == [[30, 40], [31, 41], [8, 42], [9, 43], [10, 44]]
    refused(hugepin.InvalidArgumentError, lambda: copier._pairs(gpu_spec(range(7), first_index=2), host, True),
            "7 GPU blocks from block 2 of 2 chunk(s) of 4")
    two_groups = standin.GPULoadStoreSpec([1, 2], group_sizes=(1, 1), block_indices=(0, 0))
    refused(hugepin.InvalidArgumentError, lambda: copier._pairs(two_groups, host, True), "2 KV cache groups")
    parts = gpu_spec([1, 2])
    parts.block_offsets = [0, 1]
    refused(hugepin.InvalidArgumentError, lambda: copier._pairs(parts, host, True), "block_offsets")


def test_a_rank_shut_down_before_the_arena_exists_stops_waiting(folder):
    engine = Engine(model=SMALL, tp=1, pp=1, blocks_per_chunk=2, cpu_bytes=1 << 20, engine_id=f"early-{os.getpid()}",
                    extra=(("hugepin_rendezvous_dir", folder),))
    spec = engine.make_spec(0)
    tensor = torch.zeros((SMALL.num_blocks, 512), dtype=torch.int8)
    caches = standin.CanonicalKVCaches(tensors=[standin.CanonicalKVCacheTensor(tensor, 512)],
                                       group_data_refs=[[standin.CanonicalKVCacheRef(0, 512)]])
    worker = spec.get_worker(caches)
    assert worker.copier.worker is None and worker.get_finished() == []
    published = os.path.join(folder, f"hugepin-vllm.{spec.arena}", "rank-0.json")
    assert os.path.exists(published)
    start = time.monotonic()
    worker.shutdown()  # the scheduler process never came: the wait for the arena ends now
    assert time.monotonic() - start < 5
    assert not os.path.exists(published)
    refused(hugepin.InvalidArgumentError, lambda: worker.copier.wait_attached(0), "shut down before arena")


def test_the_host_spec_travels_pickled():
    spec = pickle.loads(pickle.dumps(HugepinLoadStoreSpec([5, 1], job=9)))
    assert (spec.block_ids.tolist(), spec.job, spec.medium()) == ([5, 1], 9, "CPU")
    assert isinstance(spec, standin.LoadStoreSpec)


# ------------------------------------------------------------------------------------ the manager


class OneRank:
    """A one-rank arena of `chunks` chunks of one block, its scheduler, and its worker in this
    process over a CPU tensor: the manager under test, and a way to run its jobs."""

    def __init__(self, name: str, chunks: int):
        plan = hugepin.Plan.from_dict({"tp": 1, "pp": 1, "blocks_per_chunk": 1, "cpu_bytes": chunks * 256,
                                       "page_size": "4K", "ranks": [{"tp_rank": 0, "pp_rank": 0, "num_blocks": 16,
                                                                     "bytes_per_block": 256}]})
        scheduler = hugepin.Scheduler.create(name, plan, waive_compute_barrier=True)
        self.worker = hugepin.Worker(name, 0)
        self.device = torch.zeros((16, 256), dtype=torch.uint8)
        self.worker.set_device_kv([self.device], "host")
        self.manager = HugepinOffloadingManager(scheduler, events=True)
        assert self.manager.ranks_attached()

    def run(self, spec, store: bool = True) -> None:
        pairs = numpy.array([[c, c] for c in spec.block_ids.tolist()], dtype=numpy.int64)
        (self.worker.store if store else self.worker.load)(spec.job, pairs)

    def store(self, names) -> list:
        keys = [key(n) for n in names]
        out = self.manager.prepare_store(keys, None)
        self.run(out.store_spec)
        self.manager.complete_store(keys, None)
        return out

    def close(self) -> None:
        self.worker.detach()
        self.manager.shutdown()


def test_the_manager_evicts_least_recently_used_as_vllms_cpu_manager(arena):
    rank = OneRank(arena, 3)
    manager = rank.manager
    try:
        rank.store(["a", "b", "c"])
        assert [manager.lookup(key(n), None) for n in "abcd"] == [HIT, HIT, HIT, MISS]
        list(manager.take_events())
        manager.touch([key("a"), key("b")], None)  # most recent: a, then b; least: c
        out = manager.prepare_store([key("d")], None)
        assert out.evicted_keys == [key("c")] and out.keys_to_store == [key("d")]
        assert [(e.keys, e.removed) for e in manager.take_events()] == [([key("c")], True)]
        rank.run(out.store_spec)
        manager.complete_store([key("d")], None)

        # Blocks being loaded are not evictable; stored keys are not stored again; keys asked for
        # are protected.
        load = manager.prepare_load([key("b"), key("a")], None)
        assert manager.prepare_store([key("d"), key("e")], None) is None  # b and a loading, d asked for
        rank.run(load, store=False)
        manager.complete_load([key("b"), key("a")], None)
        out = manager.prepare_store([key("d"), key("e")], None)
        assert out.keys_to_store == [key("e")] and out.evicted_keys == [key("b")]
        rank.run(out.store_spec)
        manager.complete_store([key("e")], None)

        refused(hugepin.InvalidArgumentError, lambda: manager.prepare_load([key("zz")], None),
                key("zz").hex(), "not offloaded")
        refused(hugepin.InvalidArgumentError, lambda: manager.complete_load([key("a")], None),
                key("a").hex(), "no load in progress")
        empty = manager.prepare_store([key("a")], None)
        assert empty.keys_to_store == [] and empty.store_spec.job == 0
    finally:
        rank.close()


def test_a_store_one_rank_fails_drops_its_blocks_whatever_vllm_says(arena):
    rank = OneRank(arena, 2)
    manager = rank.manager
    try:
        out = manager.prepare_store([key("x")], None)
        assert manager.lookup(key("x"), None) == PENDING
        rank.worker.post_done(out.store_spec.job, errno.EIO)  # the rank could not copy it
        manager.complete_store([key("x")], None, success=True)
        assert manager.lookup(key("x"), None) == MISS
        [failed] = manager.failed_jobs
        assert (failed.job, failed.cause, failed.error) == (out.store_spec.job, hugepin.FailureCause.COPY_FAILED,
                                                            errno.EIO)
        assert manager.free_chunks() == 2  # its chunk came back through the fence
        out = manager.prepare_store([key("y")], None)
        manager.complete_store([key("y")], None, success=False)  # vLLM's own failure: dropped too
        rank.run(out.store_spec)
        assert manager.lookup(key("y"), None) == MISS
        manager.on_schedule_end(None)
        assert manager.free_chunks() == 2
        assert [e for e in manager.take_events()] == []  # nothing was ever readable
    finally:
        rank.close()
