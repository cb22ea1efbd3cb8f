"""hugepin.vllm at TP 2 x PP 2 (stage 0 holds twice stage 1's KV), driven as vLLM's OffloadingConnector
drives a spec, on the stand-in of vLLM's current interface (get_worker: submit_store / submit_load),
host memcpy, four rank processes: vllm_scenarios.run_connector_sequence (new request, lookup,
prepare_store, submit_store on every rank, get_finished, the quorum, complete_store, a later hit,
prepare_load, submit_load, an eviction whose chunk a rank still holds, a rank killed mid-store and
its replacement), every block checked through torch tensors. vllm_gpu_check.py runs the same with
CUDA tensors on the GPU host."""

import os

os.environ["HUGEPIN_VLLM_STANDIN"] = "current"

from vllm_scenarios import SMALL, Connector, run_connector_sequence, sequence_engine  # noqa: E402

import hugepin  # noqa: E402


def test_the_connectors_sequence_at_tp2_pp2(arena):
    connector = Connector(sequence_engine(SMALL, tp=2, pp=2, arena=arena))
    try:
        described = [rank.request({"op": "describe"}) for rank in connector.ranks]
        # Unequal stages: stage 1's regions are half of stage 0's (6 chunks of 2 blocks, 4 KiB pages).
        assert [d["length"] for d in described] == [6 * 2 * 2048] * 2 + [6 * 2 * 1024] * 2
        # vLLM's CPU sizing would fit 4 chunks, counting every rank at rank 0's payload; the plan fits 6.
        assert (connector.spec.num_blocks, connector.manager.num_blocks) == (4, 6)
        run_connector_sequence(connector)
    finally:
        codes = connector.close()
    assert codes == [0, 0, 0, 0]
    try:
        hugepin.arena_info(arena)
    except hugepin.NotFoundError:
        pass
    else:
        raise AssertionError("the manager's shutdown left the arena")
    assert not os.path.exists(f"/dev/shm/hugepin-vllm.{arena}")  # nor the rendezvous folder
