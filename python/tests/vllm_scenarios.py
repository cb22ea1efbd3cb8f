"""hugepin.vllm driven as vLLM's OffloadingConnector drives an offloading spec, across processes, on
the stand-in of vLLM's interface (HUGEPIN_VLLM_STANDIN selects the generation; set it before
importing this module). Shared by the pytest files (host memcpy, CPU tensors) and vllm_gpu_check.py
(CUDA tensors on the GPU host).

The test process is vLLM's scheduler process: it makes the spec from the engine's configuration
and asks it for the manager, and it plays the connector's part in between (request contexts, block
keys, GPU block ids, collecting every rank's get_finished before complete_store / complete_load).
Each rank is a worker process (this file run as a script, one JSON request per line): it makes the
spec from the same configuration with its own rank, allocates its KV tensors (FlashAttention
layout, one tensor per layer), canonicalizes them as the connector does (K and V of a layer become
two (num_blocks, page) int8 views), and hands them to get_worker or get_handlers. Transfer specs
reach the ranks pickled, as vLLM's metadata does. Every block is stamped with a pattern of (rank,
key, segment) and checked through torch tensors: a store's chunks in the rank's region, a load's
blocks on the device.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import torch

import hugepin
from hugepin.demo import WorkerProcess

GENERATION = os.environ.get("HUGEPIN_VLLM_STANDIN", "current")
standin = importlib.import_module(f"hugepin.vllm.standin.{GENERATION}")


@dataclass(frozen=True)
class Model:
    """What the ranks hold: `layers[pp_rank]` layers on each pipeline stage (unequal stages hold
    unequal payloads), each a (2, num_blocks, block_size, kv_heads, head_size) tensor."""
    layers: tuple
    kv_heads: int
    head_size: int
    num_blocks: int
    block_size: int = 16
    dtype: str = "bfloat16"

    def page_bytes(self) -> int:
        """Bytes of one block of K (or V) of one layer on one rank."""
        return self.block_size * self.kv_heads * self.head_size * torch.empty((), dtype=self.torch_dtype).element_size()

    @property
    def torch_dtype(self):
        return getattr(torch, self.dtype)

    def rank_bytes_per_block(self, pp_rank: int) -> int:
        return self.layers[pp_rank] * 2 * self.page_bytes()


# A small model for CI: stage 0 holds two layers, stage 1 one; 512-byte pages.
SMALL = Model(layers=(2, 1), kv_heads=2, head_size=8, num_blocks=32)


@dataclass(frozen=True)
class Engine:
    """One engine's configuration: what every process makes its spec from."""
    model: Model
    tp: int
    pp: int
    blocks_per_chunk: int
    cpu_bytes: int
    engine_id: str
    extra: tuple = ()  # more kv_connector_extra_config items

    def extra_config(self) -> dict:
        config = {"spec_name": "HugepinOffloadingSpec", "spec_module_path": "hugepin.vllm",
                  "cpu_bytes_to_use": self.cpu_bytes}
        if GENERATION == "handlers":
            config["block_size"] = self.model.block_size * self.blocks_per_chunk
        config.update(dict(self.extra))
        return config

    def spec_arguments(self, rank: int) -> tuple:
        """The spec constructor's arguments in the process of worker `rank` (0 in the scheduler's),
        as the stand-in generation's vLLM builds them."""
        pp_rank = rank // self.tp
        layers = [f"model.layers.{pp_rank}.{i}.attn" for i in range(self.model.layers[pp_rank])]
        if GENERATION == "current":
            return (standin.OffloadingConfig(
                groups=(standin.OffloadingGroupConfig(tokens_per_block=self.model.block_size, layer_names=tuple(layers)),),
                worker_kv_bytes_per_block=self.model.rank_bytes_per_block(pp_rank),
                enable_kv_cache_events=True, extra_config=self.extra_config(), engine_id=self.engine_id,
                model=standin.OffloadingModelConfig(name="stand-in", dtype=self.model.dtype),
                cache=standin.OffloadingCacheConfig(tokens_per_hash=self.model.block_size,
                                                    blocks_per_chunk=self.blocks_per_chunk),
                parallel=standin.OffloadingParallelConfig(rank=rank, world_size=self.tp * self.pp, tp_size=self.tp,
                                                          pp_size=self.pp, pcp_size=1, dcp_size=1,
                                                          data_parallel_index=0, is_parallelism_agnostic=False)),)
        vllm_config = standin.VllmConfig(
            kv_transfer_config=standin.KVTransferConfig(kv_connector="OffloadingConnector", engine_id=self.engine_id,
                                                        kv_role="kv_both", kv_connector_extra_config=self.extra_config()),
            parallel_config=standin.ParallelConfig(pipeline_parallel_size=self.pp, tensor_parallel_size=self.tp,
                                                   rank=rank),
            cache_config=standin.CacheConfig(block_size=self.model.block_size),
            kv_events_config=standin.KVEventsConfig(enable_kv_cache_events=True))
        spec = standin.FullAttentionSpec(block_size=self.model.block_size, num_kv_heads=self.model.kv_heads,
                                         head_size=self.model.head_size, dtype=self.model.dtype)
        kv_cache_config = standin.KVCacheConfig(
            num_blocks=self.model.num_blocks,
            kv_cache_tensors=[standin.KVCacheTensor(size=spec.page_size_bytes * self.model.num_blocks, shared_by=[name])
                              for name in layers],
            kv_cache_groups=[standin.KVCacheGroupSpec(layer_names=layers, kv_cache_spec=spec)])
        return vllm_config, kv_cache_config

    def make_spec(self, rank: int):
        """The spec, found as vLLM's factory finds it (spec_name in spec_module_path)."""
        return standin.OffloadingSpecFactory.create_spec(*self.spec_arguments(rank))


def key(name: str):
    """An OffloadKey: a block hash (sha256 of `name`) and KV cache group 0."""
    return standin.make_offload_key(hashlib.sha256(name.encode()).digest(), 0)


def gpu_spec(blocks, first_index: int = 0):
    """A GPULoadStoreSpec of one KV cache group."""
    return standin.GPULoadStoreSpec(list(blocks), group_sizes=(len(blocks),), block_indices=(first_index,))


def stamp(rank: int, name: str, segment: int, blocks: int, block_bytes: int):
    """The bytes `blocks` consecutive blocks of key `name` hold on `rank` in `segment`."""
    seed = int.from_bytes(hashlib.sha256(f"{rank}/{name}/{segment}".encode()).digest()[:7], "little")
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-128, 128, (blocks, block_bytes), generator=generator, dtype=torch.int8)


# ------------------------------------------------------------------------------------ a rank's process


class Rank:
    """A worker process's state: its spec, KV tensors, canonical views and vLLM-side worker; each
    request {"op": name, ...} runs the method of that name (python/bench/vllm_offload.py adds some)."""

    def __init__(self, request: dict):
        engine = unpacked(request["engine"])
        self.rank = request["rank"]
        self.device = torch.device(request.get("device", "cpu"))
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        model = engine.model
        pp_rank = self.rank // engine.tp
        self.bpc = engine.blocks_per_chunk
        self.kv = [torch.zeros((2, model.num_blocks, model.block_size, model.kv_heads, model.head_size),
                               dtype=model.torch_dtype, device=self.device) for _ in range(model.layers[pp_rank])]
        # The connector's canonical views: K and V of each layer as (num_blocks, page) int8.
        self.segments = [half for layer in self.kv for half in layer.view(torch.int8).view(2, model.num_blocks, -1)]
        caches = standin.CanonicalKVCaches(
            tensors=[standin.CanonicalKVCacheTensor(tensor=t, page_size_bytes=t.shape[1]) for t in self.segments],
            group_data_refs=[[standin.CanonicalKVCacheRef(tensor_idx=i, page_size_bytes=t.shape[1])
                              for i, t in enumerate(self.segments)]])
        self.spec = engine.make_spec(self.rank)
        if GENERATION == "current":
            self.worker = self.spec.get_worker(caches)
            self.copier = self.worker.copier
        else:  # the connector registers every handler the spec yields with its router
            self.worker = standin.OffloadingWorker()
            for src_cls, dst_cls, handler in self.spec.get_handlers(caches):
                self.worker.register_handler(src_cls, dst_cls, handler)
            self.copier = next(iter(self.worker.handlers)).copier

    def _rows(self, segment: int, first_block: int, count: int):
        return self.segments[segment][first_block:first_block + count]

    def fill(self, request: dict) -> dict:
        """Stamps the GPU blocks of each (key name, first GPU block): blocks_per_chunk blocks."""
        for name, first in request["keys"]:
            for s, segment in enumerate(self.segments):
                self._rows(s, first, self.bpc).copy_(stamp(self.rank, name, s, self.bpc, segment.shape[1]))
        if self.device.type == "cuda":
            torch.cuda.current_stream().synchronize()
        return {"ok": True}

    def zero(self, request: dict) -> dict:
        for layer in self.kv:
            layer[:, request["first"]:request["first"] + request["count"]].zero_()
        return {"ok": True}

    def submit(self, request: dict) -> dict:
        src, dst = unpacked(request["specs"])
        job = request["job"]
        if GENERATION == "handlers":
            submitted = self.worker.transfer_async(job, (src, dst))
        elif request["op"] == "store":
            submitted = self.worker.submit_store(job, src, dst)
        else:
            submitted = self.worker.submit_load(job, src, dst)
        return {"ok": True, "submitted": submitted}

    def finished(self, request: dict) -> dict:
        if request.get("wait"):
            self.worker.wait(set(request["wait"]))
        results = self.worker.get_finished()
        return {"ok": True, "results": [[r.job_id, r.success, r.transfer_size, r.transfer_time] for r in results]}

    def check_host(self, request: dict) -> dict:
        """Each (key name, chunk): the chunk's blocks in the rank's region hold the key's stamps."""
        worker = self.copier.wait_attached(30)
        for name, chunk in request["keys"]:
            for s, segment in enumerate(self.segments):
                host = worker.host_tensor(s, torch.int8)
                got = host[chunk * self.bpc:(chunk + 1) * self.bpc].clone()
                del host
                if not torch.equal(got, stamp(self.rank, name, s, self.bpc, segment.shape[1])):
                    return {"ok": False, "error": f"rank {self.rank}: chunk {chunk} segment {s} does not hold {name}"}
        return {"ok": True}

    def check_device(self, request: dict) -> dict:
        """Each (key name, first block of the key, GPU block, count): those GPU blocks hold the key's
        stamps from that block of the key on."""
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        for name, offset, first, count in request["blocks"]:
            for s, segment in enumerate(self.segments):
                want = stamp(self.rank, name, s, self.bpc, segment.shape[1])[offset:offset + count]
                if not torch.equal(self._rows(s, first, count).cpu(), want):
                    return {"ok": False, "error": f"rank {self.rank}: GPU blocks {first}.. of segment {s} do not hold "
                                                  f"{name} from block {offset}"}
        return {"ok": True}

    def describe(self, request: dict) -> dict:
        worker = self.copier.wait_attached(request.get("timeout", 60))
        region = worker.region
        return {"ok": True, "rank": worker.rank, "page_size": region.page_size, "length": region.length,
                "segments": [info.bytes_per_block for info in worker.segments], "pinned": region.pinned}

    def handle(self, request: dict) -> dict:
        op = request["op"]
        if op in ("store", "load"):
            return self.submit(request)
        return getattr(self, op)(request)

    def stop(self) -> None:
        self.worker.shutdown()


def rank_main(rank_class=None) -> int:
    """A rank's process: the first request (init) makes a `rank_class` (Rank by default); then one
    JSON reply per request line."""
    rank_class = rank_class or Rank
    rank = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "init":
                rank = rank_class(request)
                reply = {"ok": True}
            elif request["op"] == "stop":
                if rank is not None:
                    rank.stop()
                reply = {"ok": True}
            else:
                reply = rank.handle(request)
        except Exception as error:  # noqa: BLE001 (the driver gets every failure as a reply)
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        print(json.dumps(reply), flush=True)
        if request["op"] == "stop":
            return 0
    return 1


# ------------------------------------------------------------------------------------ the driver's side


def packed(value) -> str:
    """`value` pickled for a JSON request, as vLLM pickles its metadata for the workers."""
    return base64.b64encode(pickle.dumps(value)).decode()


def unpacked(text: str):
    return pickle.loads(base64.b64decode(text))


class RankProcess(WorkerProcess):
    """A rank's worker process, one JSON request and one JSON reply at a time (hugepin.demo's
    WorkerProcess: send, reply, request, stop, kill; a refusal raises RuntimeError)."""

    def __init__(self, engine: Engine, rank: int, device: str = "cpu", command=None):
        """`command`: the rank process's arguments after the interpreter (default: this file, whose
        rank_main serves Rank's requests)."""
        self.rank = rank
        self.process = subprocess.Popen([sys.executable, *(command or [os.path.abspath(__file__)])],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = self.process.pid
        self.label = f"rank {rank} (pid {self.pid})"
        self.info = None  # the init reply: started() waits for it
        self.send({"op": "init", "engine": packed(engine), "rank": rank, "device": device})

    def submit(self, op: str, job: int, src, dst) -> bool:
        return self.request({"op": op, "job": job, "specs": packed((src, dst))})["submitted"]

    def finished(self, wait=()) -> list:
        return self.request({"op": "finished", "wait": list(wait)})["results"]


class Connector:
    """The scheduler process's side: the spec's manager, the rank processes, and the bookkeeping of
    vLLM's connector (job ids, request contexts, every rank's results before completing)."""

    def __init__(self, engine: Engine, device: str = "cpu", command=None):
        self.engine, self.device, self.command = engine, device, command
        self.ranks = [RankProcess(engine, r, device, command) for r in range(engine.tp * engine.pp)]
        for rank in self.ranks:
            rank.started()  # every rank registered its KV (vLLM makes them before its scheduler)
        self.spec = engine.make_spec(0)
        self.manager = self.spec.get_manager()
        self.wait_attached()
        self._next_job = 0

    def wait_attached(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.manager.ranks_attached():
            if time.monotonic() > deadline:
                raise AssertionError(f"the ranks did not attach in {timeout} s")
            time.sleep(0.02)

    def job_id(self) -> int:
        self._next_job += 1
        return self._next_job

    def context(self, request_id: str):
        return standin.ReqContext(req_id=request_id)

    def transfer(self, op: str, job: int, src, dst, ranks=None) -> list:
        """Submits on each of `ranks` (all by default) and collects its finished results for `job`."""
        results = []
        for rank in self.ranks if ranks is None else ranks:
            assert rank.submit(op, job, src, dst), f"rank {rank.rank} refused {op} job {job}"
            results.append(rank.finished(wait=[job]))
        return results

    def close(self) -> list:
        codes = [rank.stop() for rank in self.ranks]
        self.manager.shutdown()
        return codes


# ------------------------------------------------------------------------------------ the connector's sequence

SEQUENCE_BPC = 2      # GPU blocks per chunk
SEQUENCE_CHUNKS = 6   # the host tier holds six chunks: the sequence fills it


def sequence_engine(model: Model, tp: int, pp: int, arena: str, page_size: str | None = "4K") -> Engine:
    """An engine whose arena holds SEQUENCE_CHUNKS chunks (the plan counts each rank's own payload);
    page_size None: the best the hugepage pool serves."""
    payload = sum(model.rank_bytes_per_block(r // tp) for r in range(tp * pp))
    extra = (("hugepin_arena", arena),) + ((("hugepin_page_size", page_size),) if page_size else ())
    return Engine(model=model, tp=tp, pp=pp, blocks_per_chunk=SEQUENCE_BPC,
                  cpu_bytes=SEQUENCE_CHUNKS * SEQUENCE_BPC * payload + 1000, engine_id=f"engine-{arena}", extra=extra)


def store_keys(connector: Connector, names, first_gpu_block: int, request: str = "r"):
    """The connector's store of keys `names` (GPU blocks from first_gpu_block on, SEQUENCE_BPC per
    key): every rank stamps its blocks, prepare_store, submit on every rank, collect, complete_store."""
    bpc = SEQUENCE_BPC
    keys = [key(n) for n in names]
    for rank in connector.ranks:
        rank.request({"op": "fill", "keys": [[n, first_gpu_block + bpc * i] for i, n in enumerate(names)]})
    out = connector.manager.prepare_store(keys, connector.context(request))
    assert out is not None and out.keys_to_store == keys
    job = connector.job_id()
    blocks = range(first_gpu_block, first_gpu_block + bpc * len(keys))
    for results in connector.transfer("store", job, gpu_spec(blocks), out.store_spec):
        assert [r[:2] for r in results] == [[job, True]]
    connector.manager.complete_store(keys, connector.context(request))
    return out


def wait_until(condition, manager, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        manager.on_schedule_end(None)
        time.sleep(0.01)


def run_connector_sequence(connector: Connector) -> None:
    """The order vLLM's connector calls a spec in, on a connector of sequence_engine() with at least
    two ranks (GPU blocks 0..25 of each are used); raises AssertionError at the first step that does
    not hold. The steps:

    - a new request: its lookups miss;
    - prepare_store: one job over three chunks; stored by the first rank alone, the blocks stay
      pending (the quorum); every rank's get_finished gives the bytes it moved; the blocks become
      readable only once vLLM's complete_store and every rank's report are in;
    - a later request hits the prefix: prepare_load, submit_load of whole chunks, then from the
      middle of a chunk (vLLM's block_indices);
    - the cache filled; a load the last rank has not run yet, completed early by vLLM: its block is
      evicted under pressure but its chunk is not reused (prepare_store answers None, and asking
      again evicts nothing more) until that rank's copy landed, which still reads the block's data;
      a store vLLM completes before the last rank copied it stays pending until that rank reports;
    - rank 1 stopped, then killed, before it copies a store the others copy: the job fails naming
      the rank, its block is dropped, nothing is offloaded or loaded while the rank is missing, its
      chunk comes back once the process is gone; a replacement process attaches and offloading
      resumes.
    """
    engine, manager, ranks = connector.engine, connector.manager, connector.ranks
    bpc, model = SEQUENCE_BPC, engine.model
    miss, hit, pending = standin.LookupResult.MISS, standin.LookupResult.HIT, standin.LookupResult.HIT_PENDING
    rank_bytes = [model.rank_bytes_per_block(r // engine.tp) for r in range(len(ranks))]

    # The arena: one chunk count for all ranks, each rank's region and segments its own.
    described = [rank.request({"op": "describe"}) for rank in ranks]
    assert [d["segments"] for d in described] == \
        [[model.page_bytes()] * 2 * model.layers[r // engine.tp] for r in range(len(ranks))]
    assert manager.num_blocks == SEQUENCE_CHUNKS
    assert all(d["length"] >= SEQUENCE_CHUNKS * bpc * b for d, b in zip(described, rank_bytes))
    # vLLM's CPU sizing counts every rank at the scheduler's (rank 0's) payload.
    assert connector.spec.num_blocks == engine.cpu_bytes // (rank_bytes[0] * len(ranks) * bpc)

    # A new request: nothing offloaded yet.
    context = connector.context("a")
    assert manager.on_new_request(context) == standin.RequestOffloadingContext()
    names = ["a0", "a1", "a2"]
    keys = [key(n) for n in names]
    assert [manager.lookup(k, context) for k in keys] == [miss] * 3

    # prepare_store: three chunks, one job; stored by the first rank alone, the blocks stay pending.
    for rank in ranks:
        rank.request({"op": "fill", "keys": [[n, bpc * i] for i, n in enumerate(names)]})
    out = manager.prepare_store(keys, context)
    assert out.keys_to_store == keys and out.evicted_keys == []
    assert len(set(out.store_spec.block_ids.tolist())) == 3
    job = connector.job_id()
    src = gpu_spec(range(0, 3 * bpc))
    [results] = connector.transfer("store", job, src, out.store_spec, ranks=ranks[:1])
    assert [tuple(r[:3]) for r in results] == [(job, True, 3 * bpc * rank_bytes[0])] and results[0][3] >= 0
    assert [manager.lookup(k, context) for k in keys] == [pending] * 3
    assert manager.scheduler.figures().pinned_chunks == 3

    # The other ranks: the quorum is reached, but readable only once vLLM completes the store.
    results = connector.transfer("store", job, src, out.store_spec, ranks=ranks[1:])
    assert [r[0][2] for r in results] == [3 * bpc * b for b in rank_bytes[1:]]
    assert [manager.lookup(k, context) for k in keys] == [pending] * 3
    manager.complete_store(keys, context)
    assert [manager.lookup(k, context) for k in keys] == [hit] * 3
    assert manager.scheduler.figures().pinned_chunks == 0
    events = list(manager.take_events())
    assert [(e.keys, e.removed, e.medium) for e in events] == [(keys, False, standin.Medium.CPU)]
    chunks = {n: int(c) for n, c in zip(names, out.store_spec.block_ids)}
    for rank in ranks:
        rank.request({"op": "check_host", "keys": [[n, chunks[n]] for n in names]})

    # A later request hits the prefix and loads it: whole chunks into GPU blocks 10.., then from the
    # second block of a0 on (block_indices mid-chunk) into GPU blocks 20..22.
    later = connector.context("b")
    manager.on_new_request(later)
    manager.touch(keys + [key("b3")], later)
    assert [manager.lookup(k, later) for k in keys + [key("b3")]] == [hit, hit, hit, miss]
    for rank in ranks:
        rank.request({"op": "zero", "first": 10, "count": 16})
    load = manager.prepare_load(keys, later)
    assert load.block_ids.tolist() == out.store_spec.block_ids.tolist() and load.job != out.store_spec.job
    job = connector.job_id()
    for results in connector.transfer("load", job, load, gpu_spec(range(10, 16))):
        assert [r[:2] for r in results] == [[job, True]]
    partial = manager.prepare_load(keys[:2], later)
    connector.transfer("load", connector.job_id(), partial, gpu_spec(range(20, 23), first_index=1))
    manager.complete_load(keys, later)
    manager.complete_load(keys[:2], later)
    for rank in ranks:
        rank.request({"op": "check_device", "blocks": [[n, 0, 10 + bpc * i, bpc] for i, n in enumerate(names)]})
        rank.request({"op": "check_device", "blocks": [["a0", 1, 20, 1], ["a1", 0, 21, 2]]})

    # The cache filled: three more keys; least recently used first: a2, a1, a0, c3, c4, c5.
    store_keys(connector, ["c3", "c4", "c5"], first_gpu_block=0, request="c")
    assert manager.free_chunks() == 0
    assert [(e.keys, e.removed) for e in manager.take_events()] == [([key("c3"), key("c4"), key("c5")], False)]

    # A load of a2 that the last rank has not run yet, completed early by vLLM: a2 is evictable, but
    # its chunk is held until that rank reports.
    held = manager.prepare_load([key("a2")], later)
    job = connector.job_id()
    connector.transfer("load", job, held, gpu_spec(range(24, 26)), ranks=ranks[:-1])
    manager.complete_load([key("a2")], later)
    d6 = key("d6")
    for rank in ranks:
        rank.request({"op": "fill", "keys": [["d6", 0]]})
    assert manager.prepare_store([d6], connector.context("d")) is None  # a2 evicted, its chunk held
    assert manager.lookup(key("a2"), later) == miss and manager.chunk_of(key("a2")) is None
    assert [(e.keys, e.removed) for e in manager.take_events()] == [([key("a2")], True)]
    assert manager.prepare_store([d6], connector.context("d")) is None  # and nothing more is evicted
    assert manager.lookup(key("a1"), later) == hit
    assert manager.scheduler.figures().pinned_chunks == 1

    # The last rank runs its load now: the chunk was not reused, it still holds a2.
    last = ranks[-1]
    last.request({"op": "zero", "first": 24, "count": 2})
    assert last.submit("load", job, held, gpu_spec(range(24, 26)))
    last.finished(wait=[job])
    last.request({"op": "check_device", "blocks": [["a2", 0, 24, 2]]})
    out = manager.prepare_store([d6], connector.context("d"))
    assert out.store_spec.block_ids.tolist() == [chunks["a2"]] and out.evicted_keys == []
    # vLLM completes the store before the last rank's copy: readable only once that rank reported.
    job = connector.job_id()
    connector.transfer("store", job, gpu_spec(range(0, bpc)), out.store_spec, ranks=ranks[:-1])
    manager.complete_store([d6], connector.context("d"))
    assert manager.lookup(d6, later) == pending
    connector.transfer("store", job, gpu_spec(range(0, bpc)), out.store_spec, ranks=ranks[-1:])
    assert manager.lookup(d6, later) == hit
    for rank in ranks:
        rank.request({"op": "check_host", "keys": [["d6", chunks["a2"]]]})

    # A rank killed mid-store: rank 1 is stopped, then killed, before it copies job e7; the others
    # copy it.
    e7 = key("e7")
    for rank in ranks:
        rank.request({"op": "fill", "keys": [["e7", 0]]})
    out = manager.prepare_store([e7], connector.context("e"))
    assert out.evicted_keys == [key("a1")]
    job = connector.job_id()
    connector.transfer("store", job, gpu_spec(range(0, bpc)), out.store_spec, ranks=ranks[:1])
    victim = ranks[1]
    os.kill(victim.pid, signal.SIGSTOP)
    victim.send({"op": "store", "job": job, "specs": ""})
    assert manager.lookup(e7, later) == pending
    victim.kill()
    connector.transfer("store", job, gpu_spec(range(0, bpc)), out.store_spec, ranks=ranks[2:])
    wait_until(lambda: manager.failed_jobs, manager)
    [failed] = manager.failed_jobs
    assert (failed.job, failed.rank, failed.cause) == (out.store_spec.job, 1, hugepin.FailureCause.RANK_UNRESPONSIVE)
    assert manager.lookup(e7, later) == miss and manager.chunk_of(e7) is None
    assert manager.lookup(key("c3"), later) == miss  # nothing can be loaded without rank 1
    assert manager.prepare_store([key("f8")], connector.context("f")) is None
    wait_until(lambda: manager.free_chunks() > 0, manager)  # the process is gone, the others reported
    assert manager.free_chunks() == 1

    # A replacement process for rank 1 attaches; offloading resumes.
    ranks[1] = RankProcess(engine, 1, connector.device, connector.command).started()
    connector.wait_attached()
    assert manager.lookup(key("c3"), later) == hit
    out = store_keys(connector, ["f8"], first_gpu_block=4, request="f")
    assert manager.lookup(key("f8"), later) == hit
    for rank in ranks:
        rank.request({"op": "check_host", "keys": [["f8", int(out.store_spec.block_ids[0])],
                                                   ["c3", manager.chunk_of(key("c3"))]]})
        rank.request({"op": "check_device", "blocks": [["f8", 0, 4, bpc]]})


class FakeDaemon:
    """A stand-in hugepind for the tests: answers `status` (with an arena_prefix) on a Unix socket, one
    line per connection, and records the requests."""

    def __init__(self, path: str, prefix: str = ""):
        self.path, self.prefix, self.requests = path, prefix, []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                line = connection.makefile().readline()
                self.requests.append(json.loads(line))
                reply = {"version": 1, "ok": True, "daemon": {"pid": os.getpid()},
                         "settings": {"arena_prefix": self.prefix, "retention": "0"}}
                connection.sendall(json.dumps(reply).encode() + b"\n")

    def close(self):
        self.listener.close()


if __name__ == "__main__":
    sys.exit(rank_main())
