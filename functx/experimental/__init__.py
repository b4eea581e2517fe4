"""Experimental APIs, as in ``jax.experimental`` (import the submodule you need).

* :mod:`functx.experimental.ode`: ``odeint`` (adaptive Dormand-Prince, adjoint gradients).
"""
