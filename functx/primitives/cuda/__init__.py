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
* ``fft``: the cases where cuFFT differs from NumPy;
* ``special``: the special-function primitives with ``cupyx.scipy.special``;
* ``decompositions``: cuSOLVER through CuPy for the matrix decompositions (cholesky,
  triangular_solve, lu, qr, eigh, svd; eig and schur refused, CPU-only as in JAX);
* ``_batched_lu``: stacks of small matrices for ``decompositions``' LU family (lu,
  lu_solve, lu_inverse, triangular_solve) through cuBLAS's batched routines
  (getrfBatched, trsmBatched), and the kernel turning pivots into a permutation;
* ``_kernels``: the one compile cache of every kernel, and the helpers the kernels share.

These modules import no functx primitive module (primitive families pass their generic
implementations in as ``fallback`` where a CUDA rule needs one), and none imports CuPy
when imported: CuPy comes in as ``xp`` when a rule runs, and kernels are compiled on
first use.
"""
