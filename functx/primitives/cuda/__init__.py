"""CUDA implementations of the primitives, one module per primitive family.

Each module holds the CUDA impl rules (``fn(xp, *arrays, **params)`` with ``xp`` = cupy) of
the family of the same name in ``functx.primitives``, which registers them next to the
rest of each primitive's definition with ``p.def_impl(fn, backend="cuda")``:

* ``elementwise``: ``erf`` (CUDA's erf);
* ``indexing``: ``scatter`` (last write wins), ``scatter_add`` (atomics per dtype),
  ``take_along``, ``put_along``;
* ``linalg``: ``dot_general`` on cuBLAS's strided batched GEMM, and the GEMM helpers the
  attention and convolution kernels use;
* ``fused``: ``layer_norm``, ``softmax``, ``log_softmax``, ``gelu`` and their gradients
  (row kernels, elementwise kernels);
* ``nll``: ``class_nll`` and ``class_nll_grad``;
* ``attention``: ``dot_product_attention`` and its gradient (GEMMs around fused row kernels);
* ``conv``: ``conv_general_dilated`` (im2col/col2im kernels and GEMMs);
* ``pooling``: ``max_pool`` and ``max_pool_grad`` (a thread per output window);
* ``fft``: the cases where cuFFT differs from NumPy;
* ``special``: the special-function primitives with ``cupyx.scipy.special``;
* ``decompositions``: cuSOLVER and cuBLAS for the matrix decompositions (cholesky,
  triangular_solve, lu, qr, eigh, svd; eig and schur refused, CPU-only as in JAX);
* ``_lu``: the LU family and triangular solves (lu, lu_solve, lu_inverse,
  triangular_solve): a one-block LU kernel for small matrices, cuSOLVER's getrf, cuBLAS's
  trsm and trsmBatched, and the kernels for permutations, with no host reads (capturable
  in CUDA graphs);
* ``_raw``: cuBLAS and cuSOLVER called through ctypes (CuPy's wrappers refuse stream
  capture);
* ``_kernels``: the one compile cache of every kernel, and the helpers the kernels share.

These modules import no functx primitive module (primitive families pass their generic
implementations in as ``fallback`` where a CUDA rule needs one), and none imports CuPy
when imported: CuPy comes in as ``xp`` when a rule runs, and kernels are compiled on
first use.
"""
