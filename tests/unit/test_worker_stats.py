"""Capacity estimate and process stats of a worker process."""

import os

import pytest

from worker_server.stats import LoadCounters, ProcessSampler, estimate_capacity


def test_capacity_divides_free_memory_among_processes_and_agents():
    gib = 1024**3
    assert estimate_capacity(8 * gib, procs=4, bytes_per_agent=2048) == 2 * gib // 2048
    assert estimate_capacity(8 * gib, procs=1, bytes_per_agent=2048) == 4 * 1024 * 1024


def test_capacity_rounds_down_and_never_goes_negative():
    assert estimate_capacity(4095, procs=1, bytes_per_agent=2048) == 1
    assert estimate_capacity(2047, procs=1, bytes_per_agent=2048) == 0
    assert estimate_capacity(-5, procs=2, bytes_per_agent=10) == 0


@pytest.mark.parametrize("procs, per_agent", [(0, 2048), (1, 0)])
def test_capacity_rejects_nonsense_divisors(procs, per_agent):
    with pytest.raises(ValueError):
        estimate_capacity(1024, procs=procs, bytes_per_agent=per_agent)


def test_sampler_reports_this_process():
    stats = ProcessSampler().sample()
    assert stats.pid == os.getpid()
    assert stats.rss_bytes > 1024 * 1024
    assert stats.cpu_percent >= 0.0


def test_sampler_caches_within_its_interval():
    sampler = ProcessSampler(min_interval_s=60.0)
    assert sampler.sample() is sampler.sample()


def test_load_counters_start_at_zero_until_the_agent_runtime_fills_them():
    load = LoadCounters()
    assert (load.agents, load.inflight_llm_calls) == (0, 0)
