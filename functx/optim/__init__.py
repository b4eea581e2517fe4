"""Optimizers as pure functions, following optax's protocol so optax code ports line by line.

An optimizer is a :class:`GradientTransformation`: a pair of pure functions
``init(params) -> state`` and ``update(grads, state, params=None) -> (updates, state)``.
States are pytrees of arrays (NamedTuples), so a training step runs under ``functx.jit``,
``functx.vmap`` (ensembles of models) and on CUDA; step counters are 0-d int32 arrays as in
optax. Optimizers (``sgd``, ``adam``, ``adamw``, ``lamb``, ``adafactor``, ...) are
:func:`chain`\\ s of the transformations also exported here; learning rates are floats or
schedules (functions of the step count).

Example:
    >>> import numpy as np, functx as fx, functx.numpy as fnp, functx.optim as optim
    >>> params = {"w": np.zeros(3), "b": np.zeros(())}
    >>> def loss(p, x, y):
    ...     return fnp.mean((x @ p["w"] + p["b"] - y) ** 2)
    >>> opt = optim.chain(optim.clip_by_global_norm(1.0),
    ...                   optim.adamw(optim.warmup_cosine_decay_schedule(0.0, 1e-2, 10, 100)))
    >>> state = opt.init(params)
    >>> @fx.jit
    ... def step(params, state, x, y):
    ...     grads = fx.grad(loss)(params, x, y)
    ...     updates, state = opt.update(grads, state, params)
    ...     return optim.apply_updates(params, updates), state
    >>> params, state = step(params, state, np.ones((8, 3)), np.ones(8))
"""
from functx.optim._base import (EmptyState, GradientTransformation, OptState, Params,
                                ScalarOrSchedule, Schedule, Updates, apply_updates, chain,
                                global_norm, identity, set_to_zero)
from functx.optim._factorized import FactoredState, scale_by_factored_rms
from functx.optim._optimizers import (adafactor, adagrad, adam, adamax, adamw, lamb, lion,
                                      nadam, nadamw, radam, rmsprop, sgd)
from functx.optim._schedules import (constant_schedule, cosine_decay_schedule,
                                     exponential_decay, join_schedules, linear_schedule,
                                     piecewise_constant_schedule, polynomial_schedule,
                                     warmup_cosine_decay_schedule)
from functx.optim._transforms import (AddDecayedWeightsState, EmaState,
                                      ScaleByAdamState, ScaleByLionState, ScaleByRmsState,
                                      ScaleByRmsWithCountState, ScaleByRssState,
                                      ScaleByRStdDevState, ScaleByRStdDevWithCountState,
                                      ScaleByScheduleState, TraceState, add_decayed_weights,
                                      clip, clip_by_block_rms, clip_by_global_norm, ema,
                                      scale, scale_by_adam, scale_by_adamax,
                                      scale_by_learning_rate, scale_by_lion,
                                      scale_by_param_block_norm, scale_by_param_block_rms,
                                      scale_by_radam, scale_by_rms, scale_by_rss,
                                      scale_by_schedule, scale_by_stddev,
                                      scale_by_trust_ratio, trace)
from functx.optim._wrappers import (ApplyIfFiniteState, MaskedNode, MaskedState,
                                    MultiSteps, MultiStepsState, MultiTransformState,
                                    PartitionState, apply_if_finite, masked,
                                    multi_transform, partition, skip_large_updates,
                                    skip_not_finite)

__all__ = [
    # protocol
    "GradientTransformation", "chain", "apply_updates", "identity", "set_to_zero",
    "global_norm", "EmptyState", "Params", "Updates", "OptState", "Schedule",
    "ScalarOrSchedule",
    # optimizers
    "sgd", "adam", "adamw", "nadam", "nadamw", "radam", "adamax", "adagrad", "rmsprop",
    "adafactor", "lamb", "lion",
    # transformations
    "scale", "scale_by_learning_rate", "scale_by_schedule", "trace", "ema",
    "scale_by_adam", "scale_by_adamax", "scale_by_radam", "scale_by_rss", "scale_by_rms",
    "scale_by_stddev", "scale_by_lion", "scale_by_trust_ratio", "scale_by_param_block_rms",
    "scale_by_param_block_norm", "scale_by_factored_rms", "clip", "clip_by_global_norm",
    "clip_by_block_rms", "add_decayed_weights",
    # wrappers
    "masked", "multi_transform", "partition", "MultiSteps", "apply_if_finite",
    "skip_not_finite", "skip_large_updates",
    # schedules
    "constant_schedule", "polynomial_schedule", "linear_schedule", "cosine_decay_schedule",
    "warmup_cosine_decay_schedule", "exponential_decay", "piecewise_constant_schedule",
    "join_schedules",
    # states
    "ScaleByScheduleState", "TraceState", "EmaState", "ScaleByAdamState", "ScaleByRssState",
    "ScaleByRmsState", "ScaleByRmsWithCountState", "ScaleByRStdDevState",
    "ScaleByRStdDevWithCountState", "ScaleByLionState", "AddDecayedWeightsState",
    "FactoredState", "MaskedState", "MaskedNode", "MultiTransformState", "PartitionState",
    "MultiStepsState", "ApplyIfFiniteState",
]
