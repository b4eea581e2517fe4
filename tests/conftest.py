"""Session-wide test configuration.

* ``functx.tracing.CHECK_EAGER`` is on for the whole session: every eager ``bind`` checks the
  implementation's output shape and dtype against the primitive's abstract-eval rule.
* ``functx.tracing.CHECK_TRACES`` is on too: every finished trace (``make_trace``, ``grad``'s
  forward trace...) is type-checked by re-running abstract evaluation over it.
* Hypothesis profiles: ``ci`` (the default: 25 examples, no deadline) and ``thorough``
  (200 examples). Select one with ``FUNCTX_HYPOTHESIS_PROFILE=thorough``.
* ``jit`` runs without the compiler (``FUNCTX_JIT_COMPILER=numba`` runs the suite with it).
* ``np.seterr`` is deliberately left alone: tests that expect floating-point warnings
  handle them locally.
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

import functx.compiler
import functx.tracing

settings.register_profile("ci", deadline=None, max_examples=25,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("FUNCTX_HYPOTHESIS_PROFILE", "ci"))

# jit replays traces in the suite unless FUNCTX_JIT_COMPILER says otherwise: compiling Numba
# kernels for every jit test would take most of the suite's time (tests/test_compiler.py
# turns the compiler on for its own tests).
if "FUNCTX_JIT_COMPILER" not in os.environ:
    functx.compiler.set_jit_compiler("none")

# On from import time, so that anything run while collecting is checked too.
_BEFORE = functx.tracing.CHECK_EAGER, functx.tracing.CHECK_TRACES
functx.tracing.CHECK_EAGER = functx.tracing.CHECK_TRACES = True


@pytest.fixture(autouse=True, scope="session")
def _check_eager_results():
    """Keep eager results and traces checked against abstract evaluation all session."""
    functx.tracing.CHECK_EAGER = functx.tracing.CHECK_TRACES = True
    yield
    functx.tracing.CHECK_EAGER, functx.tracing.CHECK_TRACES = _BEFORE
