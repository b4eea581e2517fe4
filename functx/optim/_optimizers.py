"""Optimizers: optax's aliases, each a :func:`chain` of transformations.

Names, signatures, defaults and update formulas are optax's (``optax/_src/alias.py``):
``updates, state = opt.update(grads, state, params)`` returns the step to add to the
params (the learning rate and the minus sign are already in it).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

import numpy as np

from functx.optim._base import GradientTransformation, ScalarOrSchedule, chain, identity
from functx.optim._factorized import scale_by_factored_rms
from functx.optim._transforms import (add_decayed_weights, clip_by_block_rms, ema, scale,
                                      scale_by_adam, scale_by_adamax,
                                      scale_by_learning_rate, scale_by_lion,
                                      scale_by_param_block_rms, scale_by_radam,
                                      scale_by_rms, scale_by_rss, scale_by_stddev,
                                      scale_by_trust_ratio, trace)

__all__ = ["sgd", "adam", "adamw", "nadam", "nadamw", "radam", "adamax", "adagrad",
           "rmsprop", "adafactor", "lamb", "lion"]

MaskOrFn = Optional[Union[Any, Callable[[Any], Any]]]


def sgd(learning_rate: ScalarOrSchedule, momentum: Optional[float] = None,
        nesterov: bool = False, accumulator_dtype: Optional[Any] = None
        ) -> GradientTransformation:
    """Stochastic gradient descent, with optional (Nesterov) momentum.

    ``t = g + momentum * t``; the update is ``-lr * t`` (``-lr * (g + momentum * t)`` with
    Nesterov); without momentum, ``-lr * g``.

    Args:
        learning_rate: a scalar or a schedule of the step count.
        momentum: the momentum coefficient, or None for plain SGD.
        nesterov: use Nesterov momentum.
        accumulator_dtype: dtype of the stored momentum (default: the params').

    Returns:
        A :class:`GradientTransformation`.

    Example:
        >>> opt = sgd(0.1, momentum=0.9)
        >>> state = opt.init(params)
        >>> updates, state = opt.update(grads, state)
        >>> params = apply_updates(params, updates)
    """
    opt = (trace(decay=momentum, nesterov=nesterov, accumulator_dtype=accumulator_dtype)
           if momentum is not None else identity())
    return chain(opt, scale_by_learning_rate(learning_rate))


def adam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Optional[Any] = None, *,
         nesterov: bool = False) -> GradientTransformation:
    """Adam (Kingma & Ba 2014).

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g**2``, update
    ``-lr * m_hat / (sqrt(v_hat + eps_root) + eps)`` with ``m_hat = m / (1 - b1**t)``,
    ``v_hat = v / (1 - b2**t)``.

    Args:
        learning_rate: a scalar or a schedule of the step count.
        b1: decay of the first moment.
        b2: decay of the second moment.
        eps: added to the denominator outside the square root.
        eps_root: added to the second moment inside the square root.
        mu_dtype: dtype of the stored first moment (default: the params').
        nesterov: use Nesterov momentum (that is :func:`nadam`).

    Returns:
        A :class:`GradientTransformation`.

    Example:
        >>> opt = adam(1e-3)
        >>> updates, state = opt.update(grads, opt.init(params))
    """
    return chain(scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype,
                               nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def nadam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Optional[Any] = None
          ) -> GradientTransformation:
    """NAdam (Dozat 2016): :func:`adam` with Nesterov momentum
    (optax's ``nadam = partial(adam, nesterov=True)``).

    Args:
        learning_rate, b1, b2, eps, eps_root, mu_dtype: as in :func:`adam`.

    Returns:
        A :class:`GradientTransformation`.

    Example:
        >>> opt = nadam(1e-3)
    """
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=True)


def adamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Optional[Any] = None,
          weight_decay: ScalarOrSchedule = 1e-4, mask: MaskOrFn = None, *,
          nesterov: bool = False) -> GradientTransformation:
    """AdamW (Loshchilov & Hutter 2019): Adam with decoupled weight decay; the update is
    ``-lr * (adam_direction + weight_decay * params)``.

    Args:
        learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov: as in :func:`adam`.
        weight_decay: the decay coefficient (a scalar or a schedule).
        mask: a pytree of booleans (or a function of the params returning one): decay
            only the leaves where it is True (e.g. not biases and norms).

    Returns:
        A :class:`GradientTransformation` (``update`` needs ``params``).

    Example:
        >>> opt = adamw(1e-3, weight_decay=1e-2, mask={"w": True, "b": False})
        >>> updates, state = opt.update(grads, state, params)
    """
    return chain(scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root, mu_dtype=mu_dtype,
                               nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def nadamw(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8, eps_root: float = 0.0, mu_dtype: Optional[Any] = None,
           weight_decay: ScalarOrSchedule = 1e-4, mask: MaskOrFn = None
           ) -> GradientTransformation:
    """:func:`adamw` with Nesterov momentum (optax's ``nadamw``).

    Args:
        learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask: as in
            :func:`adamw`.

    Returns:
        A :class:`GradientTransformation` (``update`` needs ``params``).

    Example:
        >>> opt = nadamw(1e-3, weight_decay=1e-2)
    """
    return adamw(learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask,
                 nesterov=True)


def radam(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
          eps: float = 1e-8, eps_root: float = 0.0, threshold: float = 5.0, *,
          nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam (Liu et al. 2020): plain momentum steps while the variance estimate is
    untrustworthy (``rho_t < threshold``), rectified Adam steps afterwards.

    Args:
        learning_rate, b1, b2, eps, eps_root, nesterov: as in :func:`adam`.
        threshold: the ``rho_t`` from which the adaptive step is used.

    Returns:
        A :class:`GradientTransformation`.

    Example:
        >>> opt = radam(1e-3)
    """
    return chain(scale_by_radam(b1=b1, b2=b2, eps=eps, eps_root=eps_root,
                                threshold=threshold, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adamax(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
           eps: float = 1e-8) -> GradientTransformation:
    """Adamax (Kingma & Ba 2014): Adam with the infinity norm,
    ``u = max(|g| + eps, b2 u)``, update ``-lr * m_hat / u``.

    Args:
        learning_rate: a scalar or a schedule of the step count.
        b1: decay of the first moment.
        b2: decay of the infinity norm.
        eps: added to ``|g|``.

    Returns:
        A :class:`GradientTransformation`.

    Example:
        >>> opt = adamax(2e-3)
    """
    return chain(scale_by_adamax(b1=b1, b2=b2, eps=eps), scale_by_learning_rate(learning_rate))


def adagrad(learning_rate: ScalarOrSchedule, initial_accumulator_value: float = 0.1,
            eps: float = 1e-7) -> GradientTransformation:
    """Adagrad (Duchi et al. 2011): ``s = s + g**2``, update ``-lr * g / sqrt(s + eps)``.

    Args:
        learning_rate: a scalar or a schedule of the step count.
        initial_accumulator_value: starting value of ``s``.
        eps: added inside the square root.

    Returns:
        A :class:`GradientTransformation`.

    Example:
        >>> opt = adagrad(0.1)
    """
    return chain(scale_by_rss(initial_accumulator_value=initial_accumulator_value, eps=eps),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate: ScalarOrSchedule, decay: float = 0.9, eps: float = 1e-8,
            initial_scale: float = 0.0, eps_in_sqrt: bool = True, centered: bool = False,
            momentum: Optional[float] = None, nesterov: bool = False,
            bias_correction: bool = False) -> GradientTransformation:
    """RMSProp (Hinton 2012): ``v = decay v + (1 - decay) g**2``, update
    ``-lr * g / sqrt(v + eps)``; centered, it divides by the root of the variance.

    Args:
        learning_rate: a scalar or a schedule of the step count.
        decay: decay of the moving averages.
        eps: added in the denominator (inside the root if ``eps_in_sqrt``).
        initial_scale: initial value of ``v``.
        eps_in_sqrt: where ``eps`` goes.
        centered: subtract the squared moving mean of the gradients from ``v``.
        momentum: optional momentum applied after scaling (with :func:`trace`).
        nesterov: Nesterov momentum.
        bias_correction: bias-correct the moving averages.

    Returns:
        A :class:`GradientTransformation`.

    Example:
        >>> opt = rmsprop(1e-2, momentum=0.9)
    """
    scaler = scale_by_stddev if centered else scale_by_rms
    return chain(scaler(decay=decay, eps=eps, initial_scale=initial_scale,
                        eps_in_sqrt=eps_in_sqrt, bias_correction=bias_correction),
                 scale_by_learning_rate(learning_rate),
                 trace(decay=momentum, nesterov=nesterov) if momentum is not None
                 else identity())


def adafactor(learning_rate: Optional[ScalarOrSchedule] = None,
              min_dim_size_to_factor: int = 128, decay_rate: float = 0.8,
              decay_offset: int = 0, multiply_by_parameter_scale: bool = True,
              clipping_threshold: Optional[float] = 1.0, momentum: Optional[float] = None,
              dtype_momentum: Any = np.float32,
              weight_decay_rate: Optional[ScalarOrSchedule] = None, eps: float = 1e-30,
              factored: bool = True, weight_decay_mask: MaskOrFn = None
              ) -> GradientTransformation:
    """Adafactor (Shazeer & Stern 2018): second moments stored factored (row and column
    averages) for matrices whose two largest dimensions are at least
    ``min_dim_size_to_factor``, update clipping by block RMS, relative step sizes.

    Args:
        learning_rate: a scalar, a schedule, or None (no learning-rate scaling; the step
            is then relative to the parameter scale alone).
        min_dim_size_to_factor: factor only where the second-largest dimension is at
            least this.
        decay_rate: the second-moment decay is ``1 - (t + 1)**(-decay_rate)``.
        decay_offset: subtracted from the step count in that decay (for fine-tuning).
        multiply_by_parameter_scale: scale the step by the parameters' block RMS.
        clipping_threshold: clip updates to this block RMS (None: no clipping).
        momentum: optional first-moment decay (an :func:`ema` without debiasing).
        dtype_momentum: dtype of the stored momentum (float32, as in optax).
        weight_decay_rate: optional decoupled weight decay.
        eps: regulariser added to the squared gradients.
        factored: whether to factor second moments at all.
        weight_decay_mask: mask (or function of the params) for the weight decay.

    Returns:
        A :class:`GradientTransformation` (``update`` needs ``params``).

    Example:
        >>> opt = adafactor(1e-2)
        >>> updates, state = opt.update(grads, opt.init(params), params)
    """
    tx = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
                                eps)]
    if clipping_threshold is not None:
        tx.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        tx.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        tx.append(scale_by_param_block_rms())
    if momentum is not None:
        tx.append(ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        tx.append(add_decayed_weights(weight_decay_rate, mask=weight_decay_mask))
    tx.append(scale(-1))
    return chain(*tx)


def lamb(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.999,
         eps: float = 1e-6, eps_root: float = 0.0, weight_decay: ScalarOrSchedule = 0.0,
         mask: MaskOrFn = None) -> GradientTransformation:
    """LAMB (You et al. 2020): the Adam direction plus weight decay, rescaled per leaf by
    the trust ratio ``||param|| / ||direction||``.

    Args:
        learning_rate, b1, b2, eps, eps_root: as in :func:`adam` (``eps`` defaults to 1e-6).
        weight_decay: decoupled weight decay coefficient.
        mask: mask (or function of the params) for the weight decay.

    Returns:
        A :class:`GradientTransformation` (``update`` needs ``params``).

    Example:
        >>> opt = lamb(1e-3, weight_decay=1e-2)
    """
    return chain(scale_by_adam(b1=b1, b2=b2, eps=eps, eps_root=eps_root),
                 add_decayed_weights(weight_decay=weight_decay, mask=mask),
                 scale_by_trust_ratio(),
                 scale_by_learning_rate(learning_rate))


def lion(learning_rate: ScalarOrSchedule, b1: float = 0.9, b2: float = 0.99,
         mu_dtype: Optional[Any] = None, weight_decay: ScalarOrSchedule = 1e-3,
         mask: MaskOrFn = None) -> GradientTransformation:
    """Lion (Chen et al. 2023): update ``-lr * (sign((1 - b1) g + b1 m) + wd * params)``,
    then ``m = (1 - b2) g + b2 m``.

    Args:
        learning_rate: a scalar or a schedule (Lion wants one 3-10x smaller than Adam's).
        b1: interpolation between momentum and gradient for the step.
        b2: decay of the momentum.
        mu_dtype: dtype of the stored momentum (default: the params').
        weight_decay: decoupled weight decay coefficient.
        mask: mask (or function of the params) for the weight decay.

    Returns:
        A :class:`GradientTransformation` (``update`` needs ``params``).

    Example:
        >>> opt = lion(1e-4)
    """
    return chain(scale_by_lion(b1=b1, b2=b2, mu_dtype=mu_dtype),
                 add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))
