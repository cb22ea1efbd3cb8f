"""python/bench/vllm_offload.py run through on the CPU (host memcpy, memmove in place of vLLM's CUDA
copies), so that the GPU host's run of it meets no error of its own: every row measured, the bytes
of every job those of both ranks, the copied blocks compared with the source by the benchmark."""

import os
import sys

os.environ["HUGEPIN_VLLM_STANDIN"] = "current"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))

import vllm_offload  # noqa: E402


def test_the_benchmark_runs_through_on_the_cpu(capsys):
    figures = vllm_offload.measure("cpu", blocks=16, reps=2)
    assert figures["vllm_method"] == vllm_offload.HostCopy.method
    assert sorted(figures["rows"]) == ["hugepin load", "hugepin store", "vllm load", "vllm store"]
    assert figures["bytes_per_rank"] == 16 * 32 * 2 * 16 * 4 * 128 * 2
    for row in figures["rows"].values():
        assert 0 < row["gb_per_second"]["min"] <= row["gb_per_second"]["median"] <= row["gb_per_second"]["max"]
    vllm_offload.print_table(figures)
    assert "hugepin store" in capsys.readouterr().out
