"""Neural-network functions with torch.nn.functional's names, arguments and defaults.

``import functx.nn as fnn`` and PyTorch code written against ``torch.nn.functional as F``
ports line by line (``F.`` becomes ``fnn.``). Every function is a plain composite of
functx operations, so ``grad``, ``vjp``, ``jvp`` and ``vmap`` work through all of them.

Differences from PyTorch, all because functx values are immutable:

* ``inplace=True`` is accepted and ignored: the result is always a new array.
* Functions that update running statistics in place in PyTorch (``batch_norm`` with
  ``training=True``, ``instance_norm`` with ``use_input_stats=True``) return
  ``(output, new_running_mean, new_running_var)`` when running statistics are passed
  (see functx.nn.normalization).
* ``embedding(max_norm=...)`` rescales the looked-up rows but not ``weight`` itself.
* Randomness is key-based: dropout needs an explicit PRNG key.

Errors: invalid options raise :class:`ArgumentError` (a ``ValueError``) naming the
argument and its value, bad shapes ``functx.ShapeError`` and bad dtypes
``functx.DTypeError``, before anything is computed.

Example:
    >>> import numpy as np, functx as fx, functx.nn as fnn
    >>> def loss(w, x, y):
    ...     return fnn.cross_entropy(fnn.linear(x, w), y)
    >>> g = fx.grad(loss)(np.zeros((3, 4)), np.ones((2, 4)), np.array([0, 2]))
"""
# The initializers are a submodule (functx.nn.init, as jax.nn.initializers), not in __all__,
# which lists torch.nn.functional's functions.
from functx.nn import init
from functx.nn._util import ArgumentError
from functx.nn.activations import (celu, elu, gelu, glu, hardsigmoid, hardswish, hardtanh,
                                   leaky_relu, log_sigmoid, log_softmax, logsigmoid, mish,
                                   relu, relu6, selu, sigmoid, silu, softmax, softplus,
                                   softsign)
from functx.nn.attention import scaled_dot_product_attention
from functx.nn.basic import embedding, linear, one_hot
from functx.nn.conv import (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d,
                            conv_transpose3d, fold, unfold)
from functx.nn.ctc import ctc_loss
from functx.nn.deform import deform_conv2d
from functx.nn.distance import cosine_similarity
from functx.nn.dropout import dropout
from functx.nn.losses import (binary_cross_entropy, binary_cross_entropy_with_logits,
                              cross_entropy, kl_div, nll_loss)
from functx.nn.normalization import batch_norm, group_norm, instance_norm, layer_norm, rms_norm
from functx.nn.padding import pad
from functx.nn.pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d,
                               adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d,
                               avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d, max_pool2d,
                               max_pool3d)
from functx.nn.regression_losses import huber_loss, l1_loss, mse_loss, smooth_l1_loss
from functx.nn.resample import (grid_sample, interpolate, upsample, upsample_bilinear,
                                 upsample_nearest)

__all__ = [
    "ArgumentError",
    # basic
    "embedding", "linear", "one_hot", "pad",
    # activations
    "celu", "elu", "gelu", "glu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu",
    "log_sigmoid", "log_softmax", "logsigmoid", "mish", "relu", "relu6", "selu", "sigmoid",
    "silu", "softmax", "softplus", "softsign",
    # convolution and pooling
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "fold", "max_pool1d", "max_pool2d", "max_pool3d", "unfold",
    # resampling and deformable convolution
    "deform_conv2d", "grid_sample", "interpolate", "upsample", "upsample_bilinear",
    "upsample_nearest",
    # attention
    "scaled_dot_product_attention",
    # regularisation
    "dropout",
    # normalisation
    "batch_norm", "group_norm", "instance_norm", "layer_norm", "rms_norm",
    # losses and distances
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_similarity",
    "cross_entropy", "ctc_loss", "huber_loss", "kl_div", "l1_loss", "mse_loss", "nll_loss",
    "smooth_l1_loss",
]
