"""Level-k's gaussian noise is the same bits on every CPU (worker_server/rounds/randomness.py):
its log and cosine are built from IEEE-rounded arithmetic only, and agree with the C library's
to within a few units in the last place; the normals match numpy's Box-Muller to 1e-14."""

from __future__ import annotations

import math

import numpy as np

from worker_server.rounds import randomness

IDS = np.arange(200_000, dtype=np.int64)


def test_the_log_is_within_four_ulps_of_the_c_librarys():
    u = randomness.uniforms(3, 1, 9, IDS)
    x = np.concatenate([1.0 - u, [1.0, 2.0**-53, 0.5, 0.75, 1.0 - 2.0**-53]])
    expected = np.array([math.log(v) for v in x])
    got = randomness._log(x)
    ulps = np.abs(got - expected) / np.spacing(np.maximum(np.abs(expected), 1e-300))
    assert ulps.max() <= 4, ulps.max()
    assert got[len(u)] == 0.0  # log 1


def test_the_cosine_of_a_turn_is_within_1e_15_of_the_c_librarys():
    t = np.concatenate([randomness.uniforms(3, 1, 10, IDS), [0.0, 0.125, 0.25, 0.5, 0.75]])
    expected = np.array([math.cos(2 * math.pi * v) for v in t])
    assert np.abs(randomness._cos_2pi(t) - expected).max() < 1e-15
    assert randomness._cos_2pi(np.array([0.0, 0.5]))[0] == 1.0


def test_the_normals_are_numpys_box_muller_up_to_rounding():
    u1 = randomness.uniforms(7, 3, randomness.NOISE_U1, IDS)
    u2 = randomness.uniforms(7, 3, randomness.NOISE_U2, IDS)
    numpy_way = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
    normals = randomness.normals(7, 3, IDS)
    assert np.abs(normals - numpy_way).max() < 1e-14
    assert abs(normals.mean()) < 0.01 and abs(normals.std() - 1) < 0.01
