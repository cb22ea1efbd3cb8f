"""HugepinOffloadingManager: vLLM's OffloadingManager over a hugepin scheduler (the scheduler process).

One vLLM offloaded block (blocks_per_chunk GPU blocks, named by its OffloadKey) lives in one hugepin
chunk, the same chunk id on every rank. What vLLM's CPU manager decides, this one decides the same
way: which keys are stored and readable, reference counts of loads in progress, least recently used
eviction of readable blocks nobody is loading. What hugepin adds underneath:

- prepare_store and prepare_load dispatch a hugepin job over the blocks' chunks: the chunks are
  pinned (a copy hold) until every TP x PP rank has reported the job's copies landed (the quorum),
  whatever vLLM does meanwhile. The job id travels to the ranks in the HugepinLoadStoreSpec.
- A stored block becomes readable when vLLM says its store completed (complete_store) and every
  rank's report reached the scheduler through the rings; a store job that fails (a rank reported
  a failed copy, or its process died) drops its blocks, whatever vLLM said.
- An evicted or dropped block's chunk is retired, not reused: it comes back to the free list only
  from the scheduler's reusable(), once no copy of any rank holds it and (for a rank that died
  mid-copy) its process is gone. prepare_store stores only into such chunks; when eviction frees
  chunks that a rank still holds, it stores nothing this time (returns None) and the chunks come
  back later.
- Nothing is dispatched while a rank is not attached (lookup answers a miss, prepare_store None).

The compute barrier of hugepin's fence is waived (hugepin.Scheduler(waive_compute_barrier=True)):
in vLLM's offloading path the host chunks are touched only by the plug-in's own copies, which the
copy holds cover; no GPU kernel of the model reads host memory.

One thread calls it (vLLM's scheduler); every call polls the rings without waiting.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque

import hugepin
from hugepin.errors import InvalidArgumentError
from hugepin.vllm import interface
from hugepin.vllm.load_store_spec import HugepinLoadStoreSpec

logger = logging.getLogger("hugepin.vllm")


class _Block:
    """One stored (or being stored) block: its chunk; ref_cnt -1 until readable, then the loads
    prepared and not completed; the store job; whether vLLM confirmed the store and whether every
    rank's report arrived."""
    __slots__ = ("chunk", "ref_cnt", "store_job", "confirmed", "landed")

    def __init__(self, chunk: int, store_job: int):
        self.chunk, self.ref_cnt, self.store_job = chunk, -1, store_job
        self.confirmed = self.landed = False


def _key_text(key) -> str:
    return key.hex() if isinstance(key, (bytes, bytearray)) else repr(key)


class HugepinOffloadingManager(interface.OffloadingManager):
    """vLLM's OffloadingManager with hugepin's copy pins, quorum and fence underneath (module docs).

    `scheduler` is the arena's hugepin.Scheduler (this manager closes it at shutdown); `events`:
    collect OffloadingEvents for take_events(); `stored`: (key, chunk) pairs already in the arena
    (an adopted arena's index), readable from the start, least recently used first."""

    def __init__(self, scheduler: hugepin.Scheduler, *, events: bool = False, stored=(), on_shutdown=None):
        self._scheduler = scheduler
        info = scheduler.info
        self.num_blocks = info.chunk_count
        self._ranks = info.ranks
        self._blocks: OrderedDict = OrderedDict()  # key -> _Block, least recently used first
        for key, chunk in stored:
            block = _Block(chunk, 0)
            block.ref_cnt, block.confirmed, block.landed = 0, True, True
            self._blocks[key] = block
        used = {block.chunk for block in self._blocks.values()}
        self._free = deque(chunk for chunk in range(self.num_blocks) if chunk not in used)
        self._jobs: dict = {}  # open job -> (hugepin.STORE or LOAD, its keys)
        self._retired: set = set()  # chunks given back, waiting for reusable()
        self._events = [] if events else None
        self._live = False
        self._on_shutdown = on_shutdown
        self.failed_jobs: list = []  # every hugepin.FailedJob seen, oldest first
        self._poll()

    # ------------------------------------------------------------------ vLLM's methods

    def lookup(self, key, req_context=None):
        """Readable: HIT (True in the handlers generation); stored but not yet readable (its store in
        flight, or confirmed by vLLM while a rank's report is still on its way): HIT_PENDING (None);
        else, or while a rank is not attached: MISS (False)."""
        block = self._blocks.get(key)
        if block is not None and block.ref_cnt < 0:
            self._poll()
            block = self._blocks.get(key)
        if block is None or not self._live:
            return _lookup_result("MISS", False)
        if block.ref_cnt < 0:
            return _lookup_result("HIT_PENDING", None)
        return _lookup_result("HIT", True)

    def prepare_load(self, keys, req_context=None):
        """Dispatches a load job over the blocks' chunks and protects them from eviction until
        complete_load. InvalidArgumentError naming a key that is not readable; BusyError when a
        rank is not attached."""
        self._poll()
        blocks = []
        for key in keys:
            block = self._blocks.get(key)
            if block is None or block.ref_cnt < 0:
                raise InvalidArgumentError(f"prepare_load: block {_key_text(key)} is not offloaded and readable "
                                           "(lookup answers whether it is)")
            blocks.append(block)
        chunks = [block.chunk for block in blocks]
        if not chunks:
            return HugepinLoadStoreSpec([], 0)
        job = self._scheduler.dispatch(hugepin.LOAD, chunks)
        self._jobs[job] = (hugepin.LOAD, [])
        for block in blocks:
            block.ref_cnt += 1
        return HugepinLoadStoreSpec(chunks, job)

    def touch(self, keys, req_context=None):
        """Marks the blocks most recently used, the first of `keys` most recent (as vLLM's LRU)."""
        for key in reversed(list(keys)):
            if key in self._blocks:
                self._blocks.move_to_end(key)

    def complete_load(self, keys, req_context=None):
        """Ends the protection prepare_load gave. The load's chunks stay pinned until every rank
        reported the job, whenever vLLM calls this."""
        for key in keys:
            block = self._blocks.get(key)
            if block is None or block.ref_cnt <= 0:
                raise InvalidArgumentError(f"complete_load: block {_key_text(key)} has no load in progress")
            block.ref_cnt -= 1
        self._poll()

    def prepare_store(self, keys, req_context=None):
        """The keys not stored yet, the chunks they go to (reusable ones only), and the keys evicted
        for them (least recently used readable blocks nobody loads). None when they cannot be
        stored now: a rank is not attached, too few blocks can be evicted, or chunks evicted (now or
        earlier) are still held by a copy of some rank. Those come back through the fence and count
        as coming: asking again evicts nothing more for them."""
        self._poll()
        keys = list(keys)
        to_store = [key for key in dict.fromkeys(keys) if key not in self._blocks]
        if not to_store:
            return _store_output([], HugepinLoadStoreSpec([], 0), [])
        if not self._live:
            return None
        evicted = []
        # Chunks retired earlier come back by themselves: evict only for what they cannot cover.
        short = len(to_store) - len(self._free) - len(self._retired)
        if short > 0:
            protected = set(keys)
            victims = [key for key, block in self._blocks.items() if block.ref_cnt == 0 and key not in protected]
            if len(victims) < short:
                return None
            for key in victims[:short]:
                self._retire(self._blocks.pop(key).chunk)
                evicted.append(key)
            self._event(evicted, removed=True)
            self._collect_reusable()
        if len(self._free) < len(to_store):
            logger.debug("prepare_store: %d retired chunk(s) still held by a copy; nothing stored this time",
                         len(to_store) - len(self._free))
            return None
        chunks = [self._free.popleft() for _ in to_store]
        try:
            job = self._scheduler.dispatch(hugepin.STORE, chunks)
        except hugepin.BusyError as error:  # a rank just went away, or too many jobs are open
            logger.warning("prepare_store: %s", error)
            self._free.extendleft(reversed(chunks))
            return None
        self._jobs[job] = (hugepin.STORE, to_store)
        for key, chunk in zip(to_store, chunks):
            self._blocks[key] = _Block(chunk, job)
        return _store_output(to_store, HugepinLoadStoreSpec(chunks, job), evicted)

    def complete_store(self, keys, req_context=None, success=True):
        """vLLM's verdict on a store: with success the blocks become readable once every rank's report
        has arrived too; without, they are dropped and their chunks retired."""
        self._poll()
        readable = []
        for key in keys:
            block = self._blocks.get(key)
            if block is None or block.ref_cnt >= 0:
                continue  # readable already, or dropped because its job failed
            if not success:
                self._drop(key, block)
            else:
                block.confirmed = True
                if block.landed:
                    block.ref_cnt = 0
                    readable.append(key)
        self._event(readable, removed=False)

    def on_new_request(self, req_context=None):
        return interface.RequestOffloadingContext() if interface.RequestOffloadingContext else None

    def on_schedule_end(self, context=None) -> None:
        self._poll()

    def reset_cache(self) -> None:
        """Forgets every block; their chunks come back through the fence."""
        for block in self._blocks.values():
            self._retire(block.chunk)
        self._blocks.clear()
        self._poll()

    def take_events(self):
        if self._events:
            events, self._events = self._events, []
            yield from events

    def shutdown(self) -> None:
        """Runs the spec's shutdown step (the index of a kept arena), then closes the scheduler."""
        if self._scheduler is None:
            return
        try:
            self._poll()
            if self._on_shutdown is not None:
                self._on_shutdown(self)
        finally:
            scheduler, self._scheduler = self._scheduler, None
            scheduler.close()

    # ------------------------------------------------------------------ for the spec, tests and tools

    @property
    def scheduler(self) -> hugepin.Scheduler:
        return self._scheduler

    def ranks_attached(self) -> bool:
        """Whether every rank is attached (polls first)."""
        self._poll()
        return self._live

    def stored(self) -> list:
        """(key, chunk) of every readable block, least recently used first."""
        return [(key, block.chunk) for key, block in self._blocks.items() if block.ref_cnt >= 0]

    def free_chunks(self) -> int:
        """Chunks a store may use now."""
        return len(self._free)

    def chunk_of(self, key):
        """The chunk of a stored (or being stored) block, else None."""
        block = self._blocks.get(key)
        return None if block is None else block.chunk

    # ------------------------------------------------------------------ inside

    def _poll(self) -> None:
        if self._scheduler is None:
            return
        progress = self._scheduler.poll(0)
        for job in progress.completed:
            kind, keys = self._jobs.pop(job, (None, ()))
            readable = []
            for key in keys if kind == hugepin.STORE else ():
                block = self._blocks.get(key)
                if block is not None and block.store_job == job:
                    block.landed = True
                    if block.confirmed and block.ref_cnt < 0:
                        block.ref_cnt = 0
                        readable.append(key)
            self._event(readable, removed=False)
        for failed in progress.failed:
            self.failed_jobs.append(failed)
            logger.warning("hugepin job %d failed: %s", failed.job, failed.message)
            kind, keys = self._jobs.pop(failed.job, (None, ()))
            for key in keys:
                block = self._blocks.get(key)
                if block is not None and block.store_job == failed.job and block.ref_cnt < 0:
                    self._drop(key, block)
        self._collect_reusable()
        self._live = self._scheduler.figures().live_ranks == self._ranks

    def _collect_reusable(self) -> None:
        for chunk in self._scheduler.reusable():
            self._retired.discard(chunk)
            self._free.append(chunk)

    def _retire(self, chunk: int) -> None:
        self._scheduler.retire(chunk)
        self._retired.add(chunk)

    def _drop(self, key, block: _Block) -> None:
        del self._blocks[key]
        self._retire(block.chunk)

    def _event(self, keys, removed: bool) -> None:
        if self._events is not None and keys:
            medium = interface.Medium.CPU if interface.Medium is not None else "CPU"
            self._events.append(interface.OffloadingEvent(keys=list(keys), medium=medium, removed=removed))


def _lookup_result(name: str, legacy):
    """A LookupResult member in the current generation; True / False / None in the handlers one."""
    return getattr(interface.LookupResult, name) if interface.LookupResult is not None else legacy


def _store_output(keys, spec, evicted):
    return interface.PrepareStoreOutput(keys_to_store=keys, store_spec=spec, evicted_keys=evicted)
