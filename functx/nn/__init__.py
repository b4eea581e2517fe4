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
* Randomness is key-based: dropout (and its variants), rrelu in training and
  gumbel_softmax take an explicit PRNG key as the keyword ``key``.

A few of jax.nn's names are here too, with JAX's arguments (``standardize``, ``log1mexp``,
``logmeanexp``, ``squareplus``, ``sparse_plus``, ``dot_product_attention`` in JAX's
``[batch, length, heads, features]`` layout, and ``one_hot``'s ``dtype``/``axis``
keywords).

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
                                   leaky_relu, log1mexp, log_sigmoid, log_softmax, logmeanexp,
                                   logsigmoid, mish, prelu, relu, relu6, selu, sigmoid, silu,
                                   softmax, softmin, softplus, softsign, sparse_plus,
                                   squareplus, tanh, threshold)
from functx.nn.attention import dot_product_attention, scaled_dot_product_attention
from functx.nn.basic import bilinear, embedding, embedding_bag, linear, one_hot
from functx.nn.conv import (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d,
                            conv_transpose3d, fold, unfold)
from functx.nn.ctc import ctc_loss
from functx.nn.deform import deform_conv2d
from functx.nn.distance import cdist, cosine_similarity, pairwise_distance, pdist
from functx.nn.dropout import (alpha_dropout, dropout, dropout1d, dropout2d, dropout3d,
                               feature_alpha_dropout)
from functx.nn.losses import (binary_cross_entropy, binary_cross_entropy_with_logits,
                              cross_entropy, kl_div, nll_loss)
from functx.nn.losses_margin import (cosine_embedding_loss, hinge_embedding_loss,
                                     margin_ranking_loss, multi_margin_loss,
                                     multilabel_margin_loss, multilabel_soft_margin_loss,
                                     soft_margin_loss, triplet_margin_loss,
                                     triplet_margin_with_distance_loss)
from functx.nn.normalization import (batch_norm, group_norm, instance_norm, layer_norm,
                                     local_response_norm, normalize, rms_norm, standardize)
from functx.nn.padding import pad
from functx.nn.pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d,
                               adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d,
                               avg_pool1d, avg_pool2d, avg_pool3d, lp_pool1d, lp_pool2d,
                               lp_pool3d, max_pool1d, max_pool2d, max_pool3d)
from functx.nn.regression_losses import (gaussian_nll_loss, huber_loss, l1_loss, mse_loss,
                                         poisson_nll_loss, smooth_l1_loss)
from functx.nn.resample import (affine_grid, grid_sample, interpolate, upsample,
                                 upsample_bilinear, upsample_nearest)
from functx.nn.shuffle import pixel_shuffle, pixel_unshuffle
from functx.nn.stochastic import gumbel_softmax, rrelu
from functx.nn.unpool import max_unpool1d, max_unpool2d, max_unpool3d

__all__ = [
    "ArgumentError",
    # basic
    "bilinear", "embedding", "embedding_bag", "linear", "one_hot", "pad",
    # activations
    "celu", "elu", "gelu", "glu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu",
    "log_sigmoid", "log_softmax", "logsigmoid", "mish", "prelu", "relu", "relu6", "rrelu",
    "selu", "sigmoid", "silu", "softmax", "softmin", "softplus", "softsign", "tanh",
    "threshold", "gumbel_softmax",
    # jax.nn's activations and reductions
    "log1mexp", "logmeanexp", "sparse_plus", "squareplus",
    # convolution and pooling
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "fold", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
    "max_unpool1d", "max_unpool2d", "max_unpool3d", "unfold",
    # resampling, rearranging and deformable convolution
    "affine_grid", "deform_conv2d", "grid_sample", "interpolate", "pixel_shuffle",
    "pixel_unshuffle", "upsample", "upsample_bilinear", "upsample_nearest",
    # attention
    "dot_product_attention", "scaled_dot_product_attention",
    # regularisation
    "alpha_dropout", "dropout", "dropout1d", "dropout2d", "dropout3d", "feature_alpha_dropout",
    # normalisation
    "batch_norm", "group_norm", "instance_norm", "layer_norm", "local_response_norm",
    "normalize", "rms_norm", "standardize",
    # losses and distances
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cdist", "cosine_similarity",
    "cosine_embedding_loss", "cross_entropy", "ctc_loss", "gaussian_nll_loss",
    "hinge_embedding_loss", "huber_loss", "kl_div", "l1_loss", "margin_ranking_loss",
    "mse_loss", "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
    "nll_loss", "pairwise_distance", "pdist", "poisson_nll_loss", "smooth_l1_loss",
    "soft_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
]
