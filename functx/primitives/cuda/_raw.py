"""cuBLAS and cuSOLVER called directly, through ctypes on the libraries CuPy loaded: for
the calls that must work while a CUDA graph is captured, and that must not wait for the
device.

CuPy's wrappers of both libraries refuse stream capture (each call sets the handle's stream
through a wrapper that raises while the stream captures), and ``cupy.linalg`` reads
cuSOLVER's ``info`` on the host after every factorisation, which waits for the device. The
calls here set the stream and call the routine themselves; a routine's status is returned
by the call on the host (no wait), and ``info`` stays on the device, where the callers
turn it into NaNs (functx/primitives/cuda/decompositions.py).

* :func:`library`: ``libcublas`` or ``libcusolver`` as CuPy loaded it (found in
  ``/proc/self/maps``), with the prototypes of the routines used here.
* :func:`host_scalar`: alpha and beta, which cuBLAS reads from host memory during the call
  (its default pointer mode; a captured graph keeps the value read at capture).
* :func:`cublas` and :func:`cusolver`: a routine of the library, ready to call on the
  current stream: ``cublas("d", "trsm_v2")(...)`` calls ``cublasDtrsm_v2`` with the
  current CuPy device's handle first.

Nothing here imports CuPy at import time; ``xp`` is cupy.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable

import numpy as np

_VP, _I, _LL = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong

# routine (``{t}``: the type prefix S, D, C or Z) -> argument types after the handle
_PROTOTYPES = {
    "cublas": {
        "cublasSetStream_v2": [_VP],
        "cublasGemmStridedBatchedEx": [_I, _I, _I, _I, _I, _VP, _VP, _I, _I, _LL, _VP, _I,
                                       _I, _LL, _VP, _VP, _I, _I, _LL, _I, _I, _I],
        # side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb
        "cublas{t}trsm_v2": [_I, _I, _I, _I, _I, _I, _VP, _VP, _I, _VP, _I],
        # uplo, trans, diag, n, A, lda, x, incx
        "cublas{t}trsv_v2": [_I, _I, _I, _I, _VP, _I, _VP, _I],
        # ... with arrays of pointers, and the batch count
        "cublas{t}trsmBatched": [_I, _I, _I, _I, _I, _I, _VP, _VP, _I, _VP, _I, _I],
    },
    "cusolver": {
        "cusolverDnSetStream": [_VP],
        # uplo, n, A, lda, *lwork
        "cusolverDn{t}potrf_bufferSize": [_I, _I, _VP, _I, _VP],
        # uplo, n, A, lda, work, lwork, info
        "cusolverDn{t}potrf": [_I, _I, _VP, _I, _VP, _I, _VP],
        # uplo, n, A[], lda, info[], batch
        "cusolverDn{t}potrfBatched": [_I, _I, _VP, _I, _VP, _I],
        # m, n, A, lda, *lwork
        "cusolverDn{t}getrf_bufferSize": [_I, _I, _VP, _I, _VP],
        # m, n, A, lda, work, ipiv, info
        "cusolverDn{t}getrf": [_I, _I, _VP, _I, _VP, _VP, _VP],
    },
}

# cublas_api.h's enumerations (the same values in every CUDA release)
FILL_LOWER, FILL_UPPER = 0, 1
OP_N, OP_T, OP_C = 0, 1, 2
DIAG_NON_UNIT, DIAG_UNIT = 0, 1
SIDE_LEFT, SIDE_RIGHT = 0, 1

# dtype character -> the routines' type prefix
PREFIX = {"f": "S", "d": "D", "F": "C", "D": "Z"}

_LIBS: dict = {}
_ROUTINES: dict = {}


def library(name: str) -> Any:
    """``lib<name>`` (``"cublas"`` or ``"cusolver"``) as loaded in this process by CuPy,
    through ctypes, with the prototypes of :data:`_PROTOTYPES`.

    Raises:
        RuntimeError: the library is not loaded (CuPy loads it when it first uses it:
            callers get a handle, which loads it, before calling).
    """
    lib = _LIBS.get(name)
    if lib is not None:
        return lib
    path = None
    with open("/proc/self/maps") as maps:
        for line in maps:
            base = line.rsplit("/", 1)[-1].strip()
            if base.startswith(f"lib{name}.so") and "/" in line:
                path = line[line.index("/"):].strip()
                break
    if path is None:
        raise RuntimeError(f"functx: lib{name} is not loaded in this process, so it cannot "
                           f"be called directly (CuPy loads it on its first use).")
    lib = ctypes.CDLL(path)
    for routine, args in _PROTOTYPES[name].items():
        for t in ("SDCZ" if "{t}" in routine else "S"):
            f = getattr(lib, routine.format(t=t))
            f.argtypes, f.restype = [_VP, *args], _I
    _LIBS[name] = lib
    return lib


def _handle(xp: Any, name: str) -> int:
    device = xp.cuda.device
    return device.get_cublas_handle() if name == "cublas" else device.get_cusolver_handle()


def _routine(xp: Any, name: str, symbol: str) -> Callable[..., None]:
    handle = _handle(xp, name)  # (first: getting it loads the library)
    lib = library(name)
    f = getattr(lib, symbol)
    set_stream = lib.cublasSetStream_v2 if name == "cublas" else lib.cusolverDnSetStream

    def call(*args: Any) -> None:
        set_stream(handle, xp.cuda.get_current_stream().ptr)
        status = f(handle, *args)
        if status:
            raise RuntimeError(f"{symbol} failed with status {status} (arguments {args}).")
    call.__name__ = symbol
    return call


def cublas(xp: Any, prefix: str, routine: str) -> Callable[..., None]:
    """``cublas<prefix><routine>`` on the current device's handle and the current stream
    (``prefix`` "" for type-free routines); raises RuntimeError on a nonzero status."""
    return _cached(xp, "cublas", f"cublas{prefix}{routine}")


def cusolver(xp: Any, prefix: str, routine: str) -> Callable[..., None]:
    """``cusolverDn<prefix><routine>``, as :func:`cublas`."""
    return _cached(xp, "cusolver", f"cusolverDn{prefix}{routine}")


def _cached(xp: Any, name: str, symbol: str) -> Callable[..., None]:
    key = (symbol, xp.cuda.Device().id)
    f = _ROUTINES.get(key)
    if f is None:
        f = _ROUTINES[key] = _routine(xp, name, symbol)
    return f


def workspace_size(xp: Any, prefix: str, routine: str, *args: Any) -> int:
    """cuSOLVER's ``<routine>_bufferSize`` for these arguments, in elements."""
    out = ctypes.c_int(0)
    cusolver(xp, prefix, routine + "_bufferSize")(*args, ctypes.addressof(out))
    return int(out.value)


# (dtype, value) -> (array, its address): a call site uses a few values (1, 0, a scale), so
# each array is made once; making them per call cost about 5 us of host time per GEMM.
_HOST_SCALARS: dict = {}


def host_scalar(dtype: Any, value: complex) -> tuple[np.ndarray, int]:
    """A host scalar of ``dtype`` holding ``value``, and its address (hold the pair while
    the address is in use: the cache may drop its own reference)."""
    key = (np.dtype(dtype), value)
    hit = _HOST_SCALARS.get(key)
    if hit is None:
        if len(_HOST_SCALARS) > 256:  # many distinct scales: start over
            _HOST_SCALARS.clear()
        arr = np.full((), value, dtype)
        hit = _HOST_SCALARS[key] = (arr, arr.ctypes.data)
    return hit
