"""hugepin.vllm on the stand-in of vLLM's earlier interface generation: the spec made from
(vllm_config, kv_cache_config), get_handlers registered with the connector's OffloadingWorker
router, transfers by transfer_async((src, dst)), lookup answering True / False / None. TP 2, two
rank processes, host memcpy: a store pending until vLLM's verdict and every rank's report, a hit,
a load checked on the device, the results' transfer types as the router's stats read them."""

import os

os.environ["HUGEPIN_VLLM_STANDIN"] = "handlers"

from vllm_scenarios import SMALL, Connector, Engine, gpu_spec, key, standin  # noqa: E402

import hugepin.vllm  # noqa: E402

BPC = 4


def test_the_handlers_generation_stores_and_loads_through_the_router():
    assert hugepin.vllm.GENERATION == "handlers"
    engine_id = f"handlers-{os.getpid()}"
    engine = Engine(model=SMALL, tp=2, pp=1, blocks_per_chunk=BPC, cpu_bytes=8 * BPC * 2 * 2048,
                    engine_id=engine_id, extra=(("hugepin_page_size", "4K"),))
    connector = Connector(engine)
    manager = connector.manager
    try:
        assert connector.spec.arena == f"vllm-{engine_id}"  # named from the engine id
        assert connector.spec.layout.blocks_per_chunk == BPC  # vLLM's block_size / GPU block size
        assert manager.num_blocks == connector.spec.num_blocks == 8
        context = standin.ReqContext(req_id="a")
        names = ["a0", "a1"]
        keys = [key(n) for n in names]
        assert [manager.lookup(k, context) for k in keys] == [False, False]
        for rank in connector.ranks:
            rank.request({"op": "fill", "keys": [[n, BPC * i] for i, n in enumerate(names)]})
        out = manager.prepare_store(keys, context)
        assert out.keys_to_store == keys and out.store_spec.medium() == "CPU"
        job = connector.job_id()
        [results] = connector.transfer("store", job, gpu_spec(range(2 * BPC)), out.store_spec,
                                       ranks=connector.ranks[:1])
        assert [r[:3] for r in results] == [[job, True, 2 * BPC * 2048]]
        assert [manager.lookup(k, context) for k in keys] == [None, None]  # pending: ask again later
        connector.transfer("store", job, gpu_spec(range(2 * BPC)), out.store_spec, ranks=connector.ranks[1:])
        manager.complete_store(keys, context)
        assert [manager.lookup(k, context) for k in keys] == [True, True]
        assert [(e.keys, e.removed, e.medium) for e in manager.take_events()] == [(keys, False, "CPU")]
        chunks = out.store_spec.block_ids.tolist()
        for rank in connector.ranks:
            rank.request({"op": "check_host", "keys": [[n, c] for n, c in zip(names, chunks)]})

        load = manager.prepare_load(keys, context)
        job = connector.job_id()
        for rank in connector.ranks:
            rank.request({"op": "zero", "first": 16, "count": 2 * BPC})
            assert rank.submit("load", job, load, gpu_spec(range(16, 16 + 2 * BPC)))
            assert [r[:2] for r in rank.finished(wait=[job])] == [[job, True]]
            rank.request({"op": "check_device", "blocks": [[n, 0, 16 + BPC * i, BPC] for i, n in enumerate(names)]})
        manager.complete_load(keys, context)
    finally:
        codes = connector.close()
    assert codes == [0, 0]
    try:
        hugepin.arena_info(f"vllm-{engine_id}")
    except hugepin.NotFoundError:
        pass
    else:
        raise AssertionError("the manager's shutdown left the arena")


def test_results_carry_the_transfer_type_the_routers_stats_need():
    from hugepin.vllm.worker import RankCopier

    store = RankCopier._result(3, True, 4096, 0.5, hugepin.STORE)
    load = RankCopier._result(4, True, 4096, 0.5, hugepin.LOAD)
    assert (store.transfer_type, load.transfer_type) == (("GPU", "CPU"), ("CPU", "GPU"))
