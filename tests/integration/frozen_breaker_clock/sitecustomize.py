"""Put on PYTHONPATH with POPULACE_TEST_FROZEN_BREAKER_CLOCK=1, this stops the clock of the LLM
circuit breakers in every Python process started so (a real worker node and its processes): an
open breaker then stays open, and never lets a half-open trial through, however long a test
runs. Only the breakers' clock (LlmClient's `clock`): timeouts, backoff and the event loop keep
real time. tests/integration/test_worker_llm_breaker.py uses it; tests/unit/test_llm_breaker.py
steps the breaker's clock by hand instead."""

import os

if os.environ.get("POPULACE_TEST_FROZEN_BREAKER_CLOCK") == "1":
    from worker_server.llm import client as _client

    _client.LlmClient.__init__.__kwdefaults__["clock"] = lambda: 0.0
