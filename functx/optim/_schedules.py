"""Learning-rate schedules: functions of the step count (optax's names and formulas).

A schedule maps the step count (a 0-d int32 array kept in an optimizer's state, or a Python
int) to a value. They are written with ``functx.numpy`` operations, so they work on traced
counts (under ``functx.jit`` and ``functx.vmap``) and on any device.

Decision not fixed by optax: values follow NumPy 2's promotion rules, so an int32 count
gives float64 values (JAX computes ``count / transition_steps`` for an int32 count in
float32); optimizers convert the value to each parameter's dtype.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Sequence

import functx.numpy as fnp
from functx.errors import ArgumentError
from functx.optim._base import Schedule

__all__ = ["constant_schedule", "polynomial_schedule", "linear_schedule",
           "cosine_decay_schedule", "warmup_cosine_decay_schedule", "exponential_decay",
           "piecewise_constant_schedule", "join_schedules"]

_log = logging.getLogger(__name__)


def constant_schedule(value: Any) -> Schedule:
    """A schedule that always returns ``value``.

    Args:
        value: the value.

    Returns:
        ``count -> value``.

    Example:
        >>> constant_schedule(0.1)(100)
        0.1
    """
    return lambda count: value


def polynomial_schedule(init_value: Any, end_value: Any, power: Any, transition_steps: int,
                        transition_begin: int = 0) -> Schedule:
    """Polynomial interpolation from ``init_value`` to ``end_value`` over
    ``transition_steps`` steps starting at ``transition_begin``:
    ``(init - end) * (1 - k / transition_steps)**power + end`` with
    ``k = clip(count - transition_begin, 0, transition_steps)``.

    Args:
        init_value: the value before the transition.
        end_value: the value after it.
        power: the exponent of the interpolation.
        transition_steps: its length (<= 0: the schedule is constant ``init_value``).
        transition_begin: the step it starts at (< 0 counts as 0).

    Returns:
        The schedule.

    Example:
        >>> polynomial_schedule(1.0, 0.0, 2, 10)(5)
        array(0.25)
    """
    if transition_steps <= 0:
        _log.info("A polynomial schedule was set with a non-positive transition_steps; it "
                  "is the constant init_value.")
        return lambda count: init_value
    if transition_begin < 0:
        _log.info("A polynomial schedule was set with a negative transition_begin; it "
                  "falls back to 0.")
        transition_begin = 0

    def schedule(count):
        k = fnp.clip(fnp.subtract(count, transition_begin), 0, transition_steps)
        frac = fnp.subtract(1, fnp.divide(k, transition_steps))
        return fnp.add(fnp.multiply(init_value - end_value, fnp.power(frac, power)), end_value)

    return schedule


def linear_schedule(init_value: Any, end_value: Any, transition_steps: int,
                    transition_begin: int = 0) -> Schedule:
    """Linear interpolation from ``init_value`` to ``end_value`` over ``transition_steps``
    steps starting at ``transition_begin`` (a :func:`polynomial_schedule` of power 1).

    Args:
        init_value: the value before the transition.
        end_value: the value after it.
        transition_steps: its length.
        transition_begin: the step it starts at.

    Returns:
        The schedule.

    Example:
        >>> linear_schedule(0.0, 1.0, 10)(3)
        array(0.3)
    """
    return polynomial_schedule(init_value=init_value, end_value=end_value, power=1,
                               transition_steps=transition_steps,
                               transition_begin=transition_begin)


def cosine_decay_schedule(init_value: Any, decay_steps: int, alpha: Any = 0.0,
                          exponent: Any = 1.0) -> Schedule:
    """Cosine decay (Loshchilov & Hutter 2016) from ``init_value`` to
    ``alpha * init_value`` over ``decay_steps``:
    ``init * ((1 - alpha) * (0.5 * (1 + cos(pi * k / decay_steps)))**exponent + alpha)``,
    ``k = min(count, decay_steps)``.

    Args:
        init_value: the starting value.
        decay_steps: the length of the decay (> 0).
        alpha: the final value as a fraction of ``init_value``.
        exponent: the exponent of the cosine factor.

    Returns:
        The schedule.

    Raises:
        ArgumentError: ``decay_steps`` is not positive.

    Example:
        >>> cosine_decay_schedule(1.0, 10)(5)
        array(0.5)
    """
    if not decay_steps > 0:
        raise ArgumentError("functx.optim.cosine_decay_schedule needs a positive "
                            f"decay_steps, got decay_steps={decay_steps!r}.")
    steps = float(decay_steps)

    def schedule(count):
        k = fnp.minimum(float(count) if isinstance(count, int) else count, steps)
        cosine = fnp.multiply(0.5, fnp.add(1, fnp.cos(fnp.divide(fnp.multiply(fnp.pi, k),
                                                                 steps))))
        decayed = fnp.add(fnp.multiply(1 - alpha, fnp.power(cosine, exponent)), alpha)
        return fnp.multiply(init_value, decayed)

    return schedule


def warmup_cosine_decay_schedule(init_value: Any, peak_value: Any, warmup_steps: int,
                                 decay_steps: int, end_value: Any = 0.0,
                                 exponent: Any = 1.0) -> Schedule:
    """Linear warmup from ``init_value`` to ``peak_value`` over ``warmup_steps``, then
    cosine decay to ``end_value`` at step ``decay_steps`` (which includes the warmup).

    Args:
        init_value: the value at step 0.
        peak_value: the value at the end of the warmup.
        warmup_steps: the length of the warmup.
        decay_steps: the total length (warmup included).
        end_value: the final value.
        exponent: the exponent of the cosine factor.

    Returns:
        The schedule.

    Example:
        >>> sched = warmup_cosine_decay_schedule(0.0, 1.0, 10, 110)
        >>> sched(5), sched(10), sched(110)
        (array(0.5), array(1.), array(0.))
    """
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    schedules = [linear_schedule(init_value=init_value, end_value=peak_value,
                                 transition_steps=warmup_steps),
                 cosine_decay_schedule(init_value=peak_value,
                                       decay_steps=decay_steps - warmup_steps,
                                       alpha=alpha, exponent=exponent)]
    return join_schedules(schedules, [warmup_steps])


def exponential_decay(init_value: Any, transition_steps: int, decay_rate: float,
                      transition_begin: int = 0, staircase: bool = False,
                      end_value: Optional[Any] = None) -> Schedule:
    """Exponential decay: ``init * decay_rate**((count - transition_begin) /
    transition_steps)`` after ``transition_begin`` (``init`` before), the exponent rounded
    down with ``staircase``, bounded by ``end_value`` if given.

    Args:
        init_value: the starting value.
        transition_steps: steps per factor of ``decay_rate`` (<= 0: constant).
        decay_rate: the decay factor (0: constant; > 1 grows).
        transition_begin: the step the decay starts at (< 0 counts as 0).
        staircase: decay in discrete steps.
        end_value: the lower bound (upper bound when ``decay_rate > 1``).

    Returns:
        The schedule.

    Example:
        >>> exponential_decay(1.0, 10, 0.5)(20)
        array(0.25)
    """
    if transition_steps <= 0:
        _log.info("An exponential schedule was set with a non-positive transition_steps; "
                  "it is the constant init_value.")
        return lambda count: init_value
    if decay_rate == 0:
        _log.info("An exponential schedule was set with a zero decay_rate; it is the "
                  "constant init_value.")
        return lambda count: init_value
    if transition_begin < 0:
        _log.info("An exponential schedule was set with a negative transition_begin; it "
                  "falls back to 0.")
        transition_begin = 0
    clip_fn = fnp.maximum if decay_rate < 1.0 else fnp.minimum

    def schedule(count):
        decreased = fnp.subtract(count, transition_begin)
        p = fnp.divide(decreased, transition_steps)
        if staircase:
            p = fnp.floor(p)
        value = fnp.where(fnp.less_equal(decreased, 0), init_value,
                          fnp.multiply(init_value, fnp.power(decay_rate, p)))
        if end_value is not None:
            value = clip_fn(value, end_value)
        return value

    return schedule


def piecewise_constant_schedule(init_value: Any,
                                boundaries_and_scales: Optional[dict[int, float]] = None
                                ) -> Schedule:
    """``init_value`` multiplied by ``scale`` at every boundary passed
    (``count >= boundary``).

    Args:
        init_value: the starting value.
        boundaries_and_scales: a dict from step to (non-negative) multiplier.

    Returns:
        The schedule.

    Raises:
        ArgumentError: a scale is negative.

    Example:
        >>> piecewise_constant_schedule(1.0, {10: 0.1, 20: 0.1})(15)
        array(0.1)
    """
    if boundaries_and_scales is not None:
        if not all(s >= 0.0 for s in boundaries_and_scales.values()):
            raise ArgumentError("functx.optim.piecewise_constant_schedule expects "
                                f"non-negative scales, got {boundaries_and_scales!r}.")
        items = sorted(boundaries_and_scales.items())
    else:
        items = []

    def schedule(count):
        v = init_value
        for threshold, s in items:
            indicator = fnp.maximum(0.0, fnp.sign(fnp.subtract(threshold, count)))
            v = fnp.add(fnp.multiply(v, indicator),
                        fnp.multiply(fnp.multiply(fnp.subtract(1, indicator), s), v))
        return v

    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """Runs ``schedules[0]`` until ``boundaries[0]``, then ``schedules[1]`` (counting its
    steps from the boundary), and so on.

    Args:
        schedules: the schedules, one more than boundaries.
        boundaries: the steps where each next schedule starts.

    Returns:
        The joined schedule.

    Example:
        >>> sched = join_schedules([constant_schedule(1.0), linear_schedule(1.0, 0.0, 10)],
        ...                        [5])
        >>> sched(10)
        array(0.5)
    """

    def schedule(step):
        output = schedules[0](step)
        for boundary, sched in zip(boundaries, schedules[1:]):
            output = fnp.where(fnp.less(step, boundary), output,
                               sched(fnp.subtract(step, boundary)))
        return output

    return schedule
