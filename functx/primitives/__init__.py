"""Primitive families. Importing this package registers every built-in primitive.

Each module holds one family; each primitive's whole definition (shape rule, impls, VJP,
and later JVP and batching rules) reads in one place, next to its ``bind`` wrapper.
"""
from functx.primitives import (  # noqa: F401  (import order matters only for readability)
    elementwise,
    reduction,
    shape,
    indexing,
    linalg,
    conv,
    misc,
    bits,
    bits_normal,  # normal values from random bits, in one pass
    random_gamma,  # gamma sampling (a rejection loop) and its reparameterization gradient
    checkpoint,
    fft,  # (imports complex: real, imag, conj)
    ctc,
    sort,  # sort (several operands), top_k, cummax/cummin, logcumsumexp, searchsorted
    fused,  # layer_norm, softmax, log_softmax, gelu and their gradients, fused
    nll,  # class_nll and its transpose: nll_loss and cross_entropy, fused
    attention,  # dot_product_attention and its gradient, fused
    pooling,  # max_pool and max_pool_grad (select_and_scatter_add)
    special,  # erfc, lgamma, digamma, igamma, betainc, ... (scipy.special's ufuncs)
    collectives,  # psum, all_gather, ... over named axes (functx.named_axes)
    decompositions,  # cholesky, triangular_solve, lu
    eigen,  # qr, eigh, svd, eig, schur, expm
    _rewrites,  # identities across families (the compiler's simplification)
)
