"""Gradient transformations: the building blocks the optimizers are chained from.

Names, signatures, defaults and formulas follow optax (``optax/_src/transform.py``,
``optax/transforms/_clipping.py``, ``_accumulation.py``, ``_adding.py``), so code that
composes optax transformations ports line by line. Step counters are 0-d int32 arrays on
the parameters' device, incremented with saturation as in optax.

Decisions not fixed by optax's documentation:

* Scalars derived from the step count (bias corrections, RAdam's rectification) are
  computed with NumPy 2's promotion rules (float64 from an int32 count and a Python float),
  then converted to each leaf's dtype, as optax converts them.
* optax's ``jax.lax.rsqrt(x)`` is written ``1 / sqrt(x)``.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Union

import functx.numpy as fnp
from functx import tree
from functx.errors import ArgumentError
from functx.optim._base import (EmptyState, GradientTransformation, ScalarOrSchedule,
                                Schedule, abs_sq, as_schedule_value, cast_tree, check_params,
                                full_like_tree, global_norm, identity, init_empty_state,
                                safe_increment, update_moment, update_moment_per_elem_norm,
                                zero_count, zeros_like_tree)
from functx.optim._base import bias_correction as correct_bias
from functx.optim._wrappers import masked

__all__ = [
    "scale", "scale_by_learning_rate", "scale_by_schedule", "trace", "ema",
    "scale_by_adam", "scale_by_adamax", "scale_by_radam", "scale_by_rss", "scale_by_rms",
    "scale_by_stddev", "scale_by_lion", "scale_by_trust_ratio", "scale_by_param_block_rms",
    "scale_by_param_block_norm", "clip", "clip_by_global_norm", "clip_by_block_rms",
    "add_decayed_weights",
    "ScaleByScheduleState", "TraceState", "EmaState", "ScaleByAdamState", "ScaleByRssState",
    "ScaleByRmsState", "ScaleByRmsWithCountState", "ScaleByRStdDevState",
    "ScaleByRStdDevWithCountState", "ScaleByLionState", "AddDecayedWeightsState",
]


class ScaleByScheduleState(NamedTuple):
    """State of :func:`scale_by_schedule`: the step count (0-d int32)."""
    count: Any


class TraceState(NamedTuple):
    """State of :func:`trace`: the momentum buffer."""
    trace: Any


class EmaState(NamedTuple):
    """State of :func:`ema`: the step count and the moving average."""
    count: Any
    ema: Any


class ScaleByAdamState(NamedTuple):
    """State of Adam-like transformations: step count, first and second moments."""
    count: Any
    mu: Any
    nu: Any


class ScaleByRssState(NamedTuple):
    """State of :func:`scale_by_rss`: the sum of squared gradients."""
    sum_of_squares: Any


class ScaleByRmsState(NamedTuple):
    """State of :func:`scale_by_rms` without bias correction."""
    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    """State of :func:`scale_by_rms` with bias correction."""
    count: Any
    nu: Any


class ScaleByRStdDevState(NamedTuple):
    """State of :func:`scale_by_stddev` without bias correction."""
    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    """State of :func:`scale_by_stddev` with bias correction."""
    count: Any
    mu: Any
    nu: Any


class ScaleByLionState(NamedTuple):
    """State of :func:`scale_by_lion`: step count and momentum."""
    count: Any
    mu: Any


class AddDecayedWeightsState(NamedTuple):
    """State of :func:`add_decayed_weights` with a scheduled weight decay (optax's
    ``WeightDecaySchedule``)."""
    count: Any


def _stateless(update_leaf: Callable) -> GradientTransformation:
    def update_fn(updates, state, params=None):
        del params
        return tree.map(update_leaf, updates), state
    return GradientTransformation(init_empty_state, update_fn)


# ----------------------------------------------------------------------------------------
# scaling


def scale(step_size: Any) -> GradientTransformation:
    """Multiplies every update by ``step_size``.

    Args:
        step_size: a scalar.

    Returns:
        A stateless :class:`GradientTransformation`.

    Example:
        >>> opt = chain(scale_by_adam(), scale(-1e-3))   # adam(1e-3)
    """
    return _stateless(lambda g: fnp.multiply(step_size, g))


def scale_by_schedule(step_size_fn: Schedule) -> GradientTransformation:
    """Multiplies the updates by ``step_size_fn(count)``, count = 0, 1, 2, ...

    Args:
        step_size_fn: a schedule: a function of the step count (a 0-d int32 array) built
            from ``functx.numpy`` operations (see ``functx.optim``'s schedules).

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByScheduleState`.

    Example:
        >>> opt = chain(scale_by_adam(), scale_by_schedule(lambda n: -1e-3 / (1 + n)))
    """

    def init_fn(params):
        return ScaleByScheduleState(count=zero_count(params))

    def update_fn(updates, state, params=None):
        del params
        step_size = step_size_fn(state.count)
        updates = tree.map(
            lambda g: fnp.multiply(as_schedule_value(step_size, g), g), updates)
        return updates, ScaleByScheduleState(count=safe_increment(state.count))

    return GradientTransformation(init_fn, update_fn)


def scale_by_learning_rate(learning_rate: Optional[ScalarOrSchedule] = None, *,
                           flip_sign: bool = True) -> GradientTransformation:
    """Multiplies the updates by ``-learning_rate`` (``+`` with ``flip_sign=False``).

    Args:
        learning_rate: a scalar, a schedule (a function of the step count), or None (the
            identity).
        flip_sign: whether to negate (gradient descent).

    Returns:
        :func:`scale` for a scalar, :func:`scale_by_schedule` for a schedule.

    Example:
        >>> opt = chain(scale_by_adam(), scale_by_learning_rate(1e-3))
    """
    if learning_rate is None:
        return identity()
    m = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: fnp.multiply(m, learning_rate(count)))
    return scale(m * learning_rate)


# ----------------------------------------------------------------------------------------
# momentum and moving averages


def trace(decay: Any, nesterov: bool = False,
          accumulator_dtype: Optional[Any] = None) -> GradientTransformation:
    """Momentum: ``t = g + decay * t``; the update is ``t`` (``g + decay * t`` with
    Nesterov).

    Args:
        decay: the momentum coefficient.
        nesterov: whether to use Nesterov momentum.
        accumulator_dtype: dtype of the stored trace (default: the params').

    Returns:
        A :class:`GradientTransformation` whose state is :class:`TraceState`.

    Example:
        >>> opt = chain(trace(0.9), scale(-0.1))   # sgd(0.1, momentum=0.9)
    """

    def init_fn(params):
        return TraceState(trace=zeros_like_tree(params, accumulator_dtype))

    def update_fn(updates, state, params=None):
        del params
        f = lambda g, t: fnp.add(g, fnp.multiply(decay, t))  # noqa: E731
        new_trace = tree.map(f, updates, state.trace)
        updates = tree.map(f, updates, new_trace) if nesterov else new_trace
        return updates, TraceState(trace=cast_tree(new_trace, accumulator_dtype))

    return GradientTransformation(init_fn, update_fn)


def ema(decay: Any, debias: bool = True,
        accumulator_dtype: Optional[Any] = None) -> GradientTransformation:
    """Exponential moving average of the updates: ``m = (1 - decay) g + decay m``.

    Args:
        decay: the decay rate.
        debias: whether to divide by ``1 - decay**count`` (bias correction).
        accumulator_dtype: dtype of the stored average (default: the params').

    Returns:
        A :class:`GradientTransformation` whose state is :class:`EmaState`.

    Example:
        >>> opt = chain(ema(0.9), scale(-0.1))
    """

    def init_fn(params):
        return EmaState(count=zero_count(params),
                        ema=zeros_like_tree(params, accumulator_dtype))

    def update_fn(updates, state, params=None):
        del params
        updates = new_ema = update_moment(updates, state.ema, decay, 1)
        count_inc = safe_increment(state.count)
        if debias:
            updates = correct_bias(new_ema, decay, count_inc)
        return updates, EmaState(count=count_inc, ema=cast_tree(new_ema, accumulator_dtype))

    return GradientTransformation(init_fn, update_fn)


# ----------------------------------------------------------------------------------------
# adaptive scalings


def _nesterov_mu_hat(mu: Any, updates: Any, b1: Any, count_inc: Any) -> Any:
    """Dozat's Nesterov first moment: ``b1 * mu_hat(t+1) + (1 - b1) * g_hat(t)``."""
    return tree.map(
        lambda m, g: fnp.add(fnp.multiply(b1, m), fnp.multiply(1 - b1, g)),
        correct_bias(mu, b1, safe_increment(count_inc)),
        correct_bias(updates, b1, count_inc))


def _adam_ratio(mu_hat: Any, nu_hat: Any, eps: Any, eps_root: Any) -> Any:
    return tree.map(
        lambda m, v: fnp.divide(m, fnp.add(fnp.sqrt(fnp.add(v, eps_root)), eps)),
        mu_hat, nu_hat)


def scale_by_adam(b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8, eps_root: Any = 0.0,
                  mu_dtype: Optional[Any] = None, *,
                  nesterov: bool = False) -> GradientTransformation:
    """Adam's scaling: ``mu_hat / (sqrt(nu_hat + eps_root) + eps)`` with bias-corrected
    moving averages of the gradients and of their squares.

    Args:
        b1: decay of the first moment.
        b2: decay of the second moment.
        eps: added to the denominator outside the square root.
        eps_root: added to the second moment inside the square root.
        mu_dtype: dtype of the stored first moment (default: the params').
        nesterov: use Nesterov momentum (NAdam, Dozat 2016).

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByAdamState`.

    Example:
        >>> opt = chain(scale_by_adam(), scale(-1e-3))   # adam(1e-3)
    """

    def init_fn(params):
        return ScaleByAdamState(count=zero_count(params),
                                mu=zeros_like_tree(params, mu_dtype),
                                nu=zeros_like_tree(params))

    def update_fn(updates, state, params=None):
        del params
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = safe_increment(state.count)
        if nesterov:
            mu_hat = _nesterov_mu_hat(mu, updates, b1, count_inc)
        else:
            mu_hat = correct_bias(mu, b1, count_inc)
        nu_hat = correct_bias(nu, b2, count_inc)
        updates = _adam_ratio(mu_hat, nu_hat, eps, eps_root)
        mu = cast_tree(mu, mu_dtype)
        nu = tree.map(lambda n, old: fnp.astype(n, old.dtype), nu, state.nu)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=nu)

    return GradientTransformation(init_fn, update_fn)


def scale_by_adamax(b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8) -> GradientTransformation:
    """Adamax's scaling: ``mu_hat / nu`` with ``nu = max(|g| + eps, b2 * nu)``.

    Args:
        b1: decay of the first moment.
        b2: decay of the infinity norm.
        eps: added to ``|g|``.

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByAdamState`.

    Example:
        >>> opt = chain(scale_by_adamax(), scale(-2e-3))
    """

    def init_fn(params):
        return ScaleByAdamState(count=zero_count(params), mu=zeros_like_tree(params),
                                nu=zeros_like_tree(params))

    def update_fn(updates, state, params=None):
        del params
        count_inc = safe_increment(state.count)
        mu = update_moment(updates, state.mu, b1, 1)
        nu = tree.map(lambda g, t: fnp.maximum(fnp.add(fnp.abs(g), eps), fnp.multiply(b2, t)),
                      updates, state.nu)
        mu_hat = correct_bias(mu, b1, count_inc)
        updates = tree.map(fnp.divide, mu_hat, nu)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=nu)

    return GradientTransformation(init_fn, update_fn)


def scale_by_radam(b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8, eps_root: Any = 0.0,
                   threshold: Any = 5.0, *, nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam's scaling (Liu et al. 2020): Adam's step times the rectification
    ``r`` once the variance estimate is tractable (``rho >= threshold``), else the
    bias-corrected momentum alone.

    Args:
        b1: decay of the first moment.
        b2: decay of the second moment.
        eps: added to the denominator outside the square root.
        eps_root: added to the second moment inside the square root.
        threshold: the value of ``rho`` from which the adaptive step is used.
        nesterov: use Nesterov momentum.

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByAdamState`.

    Example:
        >>> opt = chain(scale_by_radam(), scale(-1e-3))   # radam(1e-3)
    """
    ro_inf = 2.0 / (1.0 - b2) - 1.0

    def init_fn(params):
        return ScaleByAdamState(count=zero_count(params), mu=zeros_like_tree(params),
                                nu=zeros_like_tree(params))

    def update_fn(updates, state, params=None):
        del params
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count_inc = safe_increment(state.count)
        b2t = fnp.power(b2, count_inc)
        ro = fnp.subtract(ro_inf, fnp.divide(fnp.multiply(fnp.multiply(2, count_inc), b2t),
                                             fnp.subtract(1, b2t)))
        if nesterov:
            mu_hat = _nesterov_mu_hat(mu, updates, b1, count_inc)
        else:
            mu_hat = correct_bias(mu, b1, count_inc)
        nu_hat = correct_bias(nu, b2, count_inc)
        use_adaptive = fnp.greater_equal(ro, threshold)
        # r is only used where rho >= threshold; elsewhere the square root's argument may be
        # negative, so it is replaced by 1 there (no invalid-value warning, same result).
        arg = fnp.divide(
            fnp.multiply(fnp.multiply(fnp.subtract(ro, 4.0), fnp.subtract(ro, 2.0)), ro_inf),
            fnp.multiply((ro_inf - 4.0) * (ro_inf - 2.0), ro))
        r = fnp.sqrt(fnp.where(use_adaptive, arg, 1.0))
        adaptive = _adam_ratio(
            tree.map(lambda m: fnp.multiply(fnp.astype(r, m.dtype), m), mu_hat), nu_hat,
            eps, eps_root)
        updates = tree.map(lambda t, f: fnp.where(use_adaptive, t, f), adaptive, mu_hat)
        return updates, ScaleByAdamState(count=count_inc, mu=mu, nu=nu)

    return GradientTransformation(init_fn, update_fn)


def scale_by_rss(initial_accumulator_value: Any = 0.1, eps: Any = 1e-7) -> GradientTransformation:
    """Adagrad's scaling: divides by the root of the sum of all squared gradients so far
    (``1 / sqrt(s + eps)`` where ``s > 0``, else 0).

    Args:
        initial_accumulator_value: starting value of the sum (>= 0).
        eps: added inside the square root.

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByRssState`.

    Example:
        >>> opt = chain(scale_by_rss(), scale(-0.1))   # adagrad(0.1)
    """

    def init_fn(params):
        return ScaleByRssState(sum_of_squares=full_like_tree(params, initial_accumulator_value))

    def update_fn(updates, state, params=None):
        del params
        sos = tree.map(lambda g, t: fnp.add(abs_sq(g), t), updates, state.sum_of_squares)
        updates = tree.map(
            lambda t, g: fnp.multiply(
                fnp.where(fnp.greater(t, 0), fnp.divide(1, fnp.sqrt(fnp.add(t, eps))), 0.0), g),
            sos, updates)
        return updates, ScaleByRssState(sum_of_squares=sos)

    return GradientTransformation(init_fn, update_fn)


def _inv_root(x: Any, eps: Any, eps_in_sqrt: bool) -> Any:
    if eps_in_sqrt:
        return fnp.divide(1, fnp.sqrt(fnp.add(x, eps)))
    return fnp.divide(1, fnp.add(fnp.sqrt(x), eps))


def scale_by_rms(decay: Any = 0.9, eps: Any = 1e-8, initial_scale: Any = 0.0,
                 eps_in_sqrt: bool = True, bias_correction: bool = False
                 ) -> GradientTransformation:
    """RMSProp's scaling: divides by the root of a moving average of squared gradients.

    Args:
        decay: decay of the moving average.
        eps: added in the denominator (inside the root if ``eps_in_sqrt``).
        initial_scale: initial value of the average.
        eps_in_sqrt: where ``eps`` goes.
        bias_correction: whether to bias-correct the average (adds a count to the state).

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByRmsState`
        (:class:`ScaleByRmsWithCountState` with bias correction).

    Example:
        >>> opt = chain(scale_by_rms(), scale(-1e-2))   # rmsprop(1e-2)
    """
    correct = bias_correction

    def init_fn(params):
        nu = full_like_tree(params, initial_scale)
        if correct:
            return ScaleByRmsWithCountState(count=zero_count(params), nu=nu)
        return ScaleByRmsState(nu=nu)

    def update_fn(updates, state, params=None):
        del params
        nu = update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if correct:
            count_inc = safe_increment(state.count)
            nu_hat = correct_bias(nu, decay, count_inc)
        else:
            nu_hat = nu
        updates = tree.map(lambda n, g: fnp.multiply(_inv_root(n, eps, eps_in_sqrt), g),
                           nu_hat, updates)
        if correct:
            return updates, ScaleByRmsWithCountState(count=count_inc, nu=nu)
        return updates, ScaleByRmsState(nu=nu)

    return GradientTransformation(init_fn, update_fn)


def scale_by_stddev(decay: Any = 0.9, eps: Any = 1e-8, initial_scale: Any = 0.0,
                    eps_in_sqrt: bool = True, bias_correction: bool = False
                    ) -> GradientTransformation:
    """Centered RMSProp's scaling: divides by the root of the moving variance
    ``nu - mu**2`` of the gradients.

    Args:
        decay: decay of the moving averages.
        eps: added in the denominator (inside the root if ``eps_in_sqrt``).
        initial_scale: initial value of the second moment.
        eps_in_sqrt: where ``eps`` goes.
        bias_correction: whether to bias-correct both averages (adds a count).

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByRStdDevState`
        (:class:`ScaleByRStdDevWithCountState` with bias correction).

    Example:
        >>> opt = chain(scale_by_stddev(), scale(-1e-2))   # rmsprop(1e-2, centered=True)
    """
    correct = bias_correction

    def init_fn(params):
        mu, nu = zeros_like_tree(params), full_like_tree(params, initial_scale)
        if correct:
            return ScaleByRStdDevWithCountState(count=zero_count(params), mu=mu, nu=nu)
        return ScaleByRStdDevState(mu=mu, nu=nu)

    def update_fn(updates, state, params=None):
        del params
        mu = update_moment(updates, state.mu, decay, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if correct:
            count_inc = safe_increment(state.count)
            mu_hat = correct_bias(mu, decay, count_inc)
            nu_hat = correct_bias(nu, decay, count_inc)
        else:
            mu_hat, nu_hat = mu, nu
        updates = tree.map(
            lambda m, n, g: fnp.multiply(
                _inv_root(fnp.subtract(n, abs_sq(m)), eps, eps_in_sqrt), g),
            mu_hat, nu_hat, updates)
        if correct:
            return updates, ScaleByRStdDevWithCountState(count=count_inc, mu=mu, nu=nu)
        return updates, ScaleByRStdDevState(mu=mu, nu=nu)

    return GradientTransformation(init_fn, update_fn)


def scale_by_lion(b1: Any = 0.9, b2: Any = 0.99, mu_dtype: Optional[Any] = None, *,
                  mode: str = "hard", smooth_beta: float = 1.0) -> GradientTransformation:
    """Lion's scaling (Chen et al. 2023): ``sign((1 - b1) g + b1 mu)``, then
    ``mu = (1 - b2) g + b2 mu``.

    Args:
        b1: interpolation between the momentum and the gradient for the step.
        b2: decay of the momentum.
        mu_dtype: dtype of the stored momentum (default: the params').
        mode: ``"hard"`` (sign), ``"smooth"`` (``tanh(smooth_beta * x)``) or
            ``"refined"`` (``x`` where ``|x| < 1``, else its sign).
        smooth_beta: the slope of the ``"smooth"`` mode.

    Returns:
        A :class:`GradientTransformation` whose state is :class:`ScaleByLionState`.

    Raises:
        ArgumentError: ``mode`` is not one of the three.

    Example:
        >>> opt = chain(scale_by_lion(), scale(-1e-4))
    """

    if mode not in ("hard", "smooth", "refined"):
        raise ArgumentError(f"functx.optim.scale_by_lion: unknown mode {mode!r}; use 'hard', "
                            "'smooth' or 'refined'.")

    def direction(g, m):
        x = fnp.add(fnp.multiply(1.0 - b1, g), fnp.multiply(b1, m))
        if mode == "hard":
            return fnp.sign(x)
        if mode == "smooth":
            return fnp.tanh(fnp.multiply(smooth_beta, x))
        return fnp.where(fnp.less(fnp.abs(x), 1.0), x, fnp.sign(x))

    def init_fn(params):
        return ScaleByLionState(count=zero_count(params), mu=zeros_like_tree(params, mu_dtype))

    def update_fn(updates, state, params=None):
        del params
        new_updates = tree.map(direction, updates, state.mu)
        mu = cast_tree(update_moment(updates, state.mu, b2, 1), mu_dtype)
        return new_updates, ScaleByLionState(count=safe_increment(state.count), mu=mu)

    return GradientTransformation(init_fn, update_fn)


# ----------------------------------------------------------------------------------------
# scalings by parameter norms


def _l2(x: Any) -> Any:
    return fnp.sqrt(fnp.sum(abs_sq(x)))


def _safe_norm(x: Any, min_norm: Any) -> Any:
    """``max(||x||, min_norm)`` as optax's ``safe_norm`` (whole-array 2-norm)."""
    norm = _l2(x)
    masked_x = fnp.where(fnp.less_equal(norm, min_norm), fnp.ones_like(x), x)
    return fnp.where(fnp.less_equal(norm, min_norm), min_norm, _l2(masked_x))


def _safe_rms(x: Any, min_rms: Any) -> Any:
    rms = fnp.sqrt(fnp.mean(abs_sq(x)))
    masked_x = fnp.where(fnp.less_equal(rms, min_rms), fnp.ones_like(x), x)
    return fnp.where(fnp.less_equal(rms, min_rms), min_rms,
                     fnp.sqrt(fnp.mean(abs_sq(masked_x))))


def scale_by_trust_ratio(min_norm: Any = 0.0, trust_coefficient: Any = 1.0,
                         eps: Any = 0.0) -> GradientTransformation:
    """LAMB/LARS trust ratio: scales each leaf's update by
    ``trust_coefficient * ||param|| / (||update|| + eps)`` (1 where either norm is 0).

    Args:
        min_norm: norms below this count as this value.
        trust_coefficient: multiplies the ratio.
        eps: added to the update norm.

    Returns:
        A stateless :class:`GradientTransformation` (``update`` needs ``params``).

    Raises:
        ArgumentError: ``update`` is called without ``params``.

    Example:
        >>> opt = chain(scale_by_adam(), scale_by_trust_ratio(), scale(-1e-3))
    """

    def update_fn(updates, state, params=None):
        check_params("scale_by_trust_ratio", params)

        def scale_leaf(u, p):
            p_norm, u_norm = _safe_norm(p, min_norm), _safe_norm(u, min_norm)
            ratio = fnp.divide(fnp.multiply(trust_coefficient, p_norm), fnp.add(u_norm, eps))
            zero = fnp.logical_or(fnp.equal(p_norm, 0.0), fnp.equal(u_norm, 0.0))
            return fnp.multiply(u, fnp.where(zero, fnp.ones((), p.dtype, like=p), ratio))

        return tree.map(scale_leaf, updates, params), state

    return GradientTransformation(init_empty_state, update_fn)


def scale_by_param_block_rms(min_scale: Any = 1e-3) -> GradientTransformation:
    """Scales each leaf's update by the root mean square of its parameter (at least
    ``min_scale``); Adafactor's ``multiply_by_parameter_scale``.

    Args:
        min_scale: the smallest scale.

    Returns:
        A stateless :class:`GradientTransformation` (``update`` needs ``params``).

    Raises:
        ArgumentError: ``update`` is called without ``params``.

    Example:
        >>> opt = chain(scale_by_rms(), scale_by_param_block_rms(), scale(-1e-2))
    """

    def update_fn(updates, state, params=None):
        check_params("scale_by_param_block_rms", params)
        return tree.map(lambda u, p: fnp.multiply(u, _safe_rms(p, min_scale)),
                        updates, params), state

    return GradientTransformation(init_empty_state, update_fn)


def scale_by_param_block_norm(min_scale: Any = 1e-3) -> GradientTransformation:
    """Scales each leaf's update by the 2-norm of its parameter (at least ``min_scale``).

    Args:
        min_scale: the smallest scale.

    Returns:
        A stateless :class:`GradientTransformation` (``update`` needs ``params``).

    Raises:
        ArgumentError: ``update`` is called without ``params``.

    Example:
        >>> opt = chain(scale_by_param_block_norm(), scale(-1e-2))
    """

    def update_fn(updates, state, params=None):
        check_params("scale_by_param_block_norm", params)
        return tree.map(lambda u, p: fnp.multiply(u, _safe_norm(p, min_scale)),
                        updates, params), state

    return GradientTransformation(init_empty_state, update_fn)


# ----------------------------------------------------------------------------------------
# clipping and weight decay


def clip(max_delta: Any) -> GradientTransformation:
    """Clips every update elementwise to ``[-max_delta, max_delta]``.

    Args:
        max_delta: the largest magnitude kept.

    Returns:
        A stateless :class:`GradientTransformation`.

    Example:
        >>> opt = chain(clip(1.0), sgd(0.1))
    """
    return _stateless(lambda g: fnp.clip(g, -max_delta, max_delta))


def clip_by_global_norm(max_norm: Any) -> GradientTransformation:
    """Rescales all updates together so that their global L2 norm is at most
    ``max_norm`` (unchanged when it is already below).

    Args:
        max_norm: the largest global norm kept.

    Returns:
        A stateless :class:`GradientTransformation`.

    Example:
        >>> opt = chain(clip_by_global_norm(1.0), adam(1e-3))
    """

    def update_fn(updates, state, params=None):
        del params
        g_norm = global_norm(updates)
        trigger = fnp.less(g_norm, max_norm)
        updates = tree.map(
            lambda t: fnp.where(trigger, t, fnp.multiply(
                fnp.divide(t, fnp.astype(g_norm, t.dtype)), max_norm)), updates)
        return updates, state

    return GradientTransformation(init_empty_state, update_fn)


def clip_by_block_rms(threshold: Any) -> GradientTransformation:
    """Divides each leaf's update by ``max(1, rms(update) / threshold)``.

    Args:
        threshold: the largest root mean square kept per leaf.

    Returns:
        A stateless :class:`GradientTransformation`.

    Example:
        >>> opt = chain(clip_by_block_rms(1.0), sgd(0.1))
    """

    def clip_leaf(u):
        denom = fnp.maximum(1.0, fnp.divide(fnp.sqrt(fnp.mean(abs_sq(u))), threshold))
        return fnp.divide(u, denom)

    return _stateless(clip_leaf)


def add_decayed_weights(weight_decay: ScalarOrSchedule = 0.0,
                        mask: Optional[Union[Any, Callable[[Any], Any]]] = None
                        ) -> GradientTransformation:
    """Adds ``weight_decay * params`` to the updates (decoupled weight decay, AdamW).

    Args:
        weight_decay: a scalar or a schedule of the step count.
        mask: a pytree of booleans with the params' structure (or a prefix of it), or a
            function of the params returning one: decay only where True.

    Returns:
        A :class:`GradientTransformation` (``update`` needs ``params``); its state is
        empty, or :class:`AddDecayedWeightsState` for a scheduled decay (wrapped in
        ``MaskedState`` when ``mask`` is given).

    Raises:
        ArgumentError: ``update`` is called without ``params``.

    Example:
        >>> opt = chain(scale_by_adam(), add_decayed_weights(1e-4), scale(-1e-3))
    """

    def init_fn(params):
        if callable(weight_decay):
            return AddDecayedWeightsState(count=zero_count(params))
        return EmptyState()

    def update_fn(updates, state, params=None):
        check_params("add_decayed_weights", params)
        new_state = (AddDecayedWeightsState(count=safe_increment(state.count))
                     if callable(weight_decay) else state)
        if isinstance(weight_decay, (int, float)) and weight_decay == 0.0:
            return updates, new_state
        if callable(weight_decay):  # a schedule's value, in each parameter's dtype
            s = weight_decay(state.count)
            decay = lambda g, p: fnp.add(g, fnp.multiply(as_schedule_value(s, p), p))  # noqa
        else:
            decay = lambda g, p: fnp.add(g, fnp.multiply(weight_decay, p))  # noqa: E731
        return tree.map(decay, updates, params), new_state

    tx = GradientTransformation(init_fn, update_fn)
    return masked(tx, mask) if mask is not None else tx

