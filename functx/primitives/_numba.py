"""Numba, imported lazily: the one place that says whether functx uses it, and how its
threads behave.

Numba is optional (``pip install 'functx[jit]'``). Every user of it (the kernels of
``functx.primitives``: random bits, erf, convolutions; and ``jit``'s CPU compiler in
``functx.compiler``, a higher layer) asks this module:

* :func:`numba_installed` whether it can be imported (without importing it);
* :func:`numba_enabled` whether functx may use it: installed, and not turned off with
  ``FUNCTX_NUMBA=0`` in the environment (the NumPy paths and ``jit``'s replay then run;
  the tests use it to check that both paths give the same bits);
* :func:`numba_or_none` / :func:`import_numba` for the module itself, imported on first
  use (never at ``import functx``) with the threading policy below applied first;
* :func:`njit_variant` to compile a kernel (cached on disk, under a name of its own), and
  :func:`serialised` to launch a ``parallel=True`` kernel under the process-wide lock.

The threading policy (:func:`apply_thread_policy`), applied once, before Numba runs any
parallel kernel, unless the user chose (``NUMBA_THREADING_LAYER`` or
``numba.config.THREADING_LAYER``):

* Numba's **tbb** threading layer where Intel's oneTBB is installed (``pip install tbb``,
  part of the ``jit`` extra on Linux x86-64; :func:`tbb_loadable` loads its library, which a
  pip install leaves off the loader's path). Its workers wake in microseconds and run
  kernels launched from several threads at once. On a 16-core Xeon it took bench_conv's
  jit steps from 6.32 / 6.45 / 9.84 ms (workqueue) to 5.06 / 4.54 / 8.10 ms (conv2d
  16x32->64, 8x64->64, LeNet; benchmarks/README.md, session 11).
* Else Numba's **workqueue** threading layer. Its threads sleep between kernels. The OpenMP
  layer's threads (GNU OpenMP spin-waits by default) kept the cores after each kernel and
  took them from the BLAS and PyTorch threads that ran next: bench_conv's LeNet step under
  ``jit`` took 40-44 ms with OpenMP against 8.4-8.7 ms with workqueue on the 2-core machine
  (session 4); on session 7's loaded 2-core machine, 219 ms (OpenMP, spinning), 123 ms
  (OpenMP with ``OMP_WAIT_POLICY=passive``) and 16 ms (workqueue).
* The workqueue layer aborts the process when two threads launch parallel kernels at once
  (``pmap``'s members on the CPU are threads), so every parallel kernel runs under one
  process-wide lock (:func:`serialised`); each uses every core anyway.
* Where the user picked a layer that may be OpenMP, ``OMP_WAIT_POLICY=passive`` unless they
  set it (it takes effect only if OpenMP is not loaded yet): under load a ``prange`` loop
  with spinning threads ran 2x slower than a serial one, 1.5x faster with passive waiting.
  With workqueue it is left alone, so other libraries' OpenMP runtimes (PyTorch's) keep
  their own defaults.

Kernels are compiled with ``cache=True`` (on disk, beside this package's ``__pycache__``
for :func:`njit_variant`), so a second process loads them instead of compiling.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
import types
from typing import Any, Callable, Sequence

__all__ = ["numba_installed", "numba_enabled", "numba_or_none", "import_numba", "tbb_loadable",
           "apply_thread_policy", "njit_variant", "compile_loop", "serialised", "LAUNCH_LOCK"]

_state: dict[str, Any] = {}

# Held around every parallel kernel launch (see the module docstring).
LAUNCH_LOCK = threading.Lock()


def numba_installed() -> bool:
    """Whether Numba can be imported (checked without importing it)."""
    return importlib.util.find_spec("numba") is not None


def numba_enabled() -> bool:
    """Whether functx may use Numba: installed, and not turned off with ``FUNCTX_NUMBA=0``."""
    return os.environ.get("FUNCTX_NUMBA", "1") != "0" and numba_installed()


def apply_thread_policy(numba: Any = None) -> None:
    """Apply functx's threading policy (see the module docstring): before Numba is imported
    (``numba`` None) the environment part, after (``numba`` the module) the threading layer,
    which Numba reads when its first parallel kernel runs. A user's choice wins."""
    user_layer = os.environ.get("NUMBA_THREADING_LAYER", "").strip()
    if numba is None:
        if user_layer and user_layer != "workqueue":
            os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        return
    if user_layer or numba.config.THREADING_LAYER != "default":
        return
    try:
        numba.threading_layer()  # raises until a parallel kernel has run
    except ValueError:
        numba.config.THREADING_LAYER = "tbb" if tbb_loadable() else "workqueue"


def tbb_loadable() -> bool:
    """Whether Numba's TBB threading layer can load: the ``tbb`` distribution's
    ``libtbb.so.12`` is loaded first (``pip install tbb`` puts it off the loader's search
    path), then Numba's TBB pool is imported. Off with ``FUNCTX_TBB=0``."""
    if os.environ.get("FUNCTX_TBB", "1") == "0":
        return False
    if "tbb" not in _state:
        try:
            lib = _tbb_library()
            if lib is not None:
                ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
            from numba.np.ufunc import tbbpool  # noqa: F401, PLC0415  (Numba's own pool)
            _state["tbb"] = True
        except (ImportError, OSError):
            _state["tbb"] = False
    return _state["tbb"]


def _tbb_library() -> str | None:
    """The path of the ``tbb`` distribution's ``libtbb.so.12`` (pip puts it in the
    environment's ``lib`` folder: ``sys.prefix/lib`` in a virtual environment,
    ``/usr/local/lib`` for a system Python), or None."""
    import importlib.metadata  # noqa: PLC0415  (stdlib, 15 ms: only when Numba is imported)

    try:
        files = importlib.metadata.files("tbb") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "libtbb.so.12":
            return str(f.locate())
    lib = os.path.join(sys.prefix, "lib", "libtbb.so.12")
    return lib if os.path.exists(lib) else None


def import_numba() -> Any:
    """The ``numba`` module, imported (on the first call) after the threading policy.

    Raises:
        ImportError: Numba is not installed.
    """
    numba = _state.get("numba")
    if numba is None:
        apply_thread_policy()
        import numba  # noqa: PLC0415  (optional dependency, imported on first use)

        apply_thread_policy(numba)
        _state["numba"] = numba
    return numba


def numba_or_none() -> Any:
    """The ``numba`` module, or None when it is not installed or ``FUNCTX_NUMBA=0``."""
    if os.environ.get("FUNCTX_NUMBA", "1") == "0":
        return None
    numba = _state.get("numba")
    if numba is None and "missing" not in _state:
        try:
            numba = import_numba()
        except ImportError:
            _state["missing"] = True
    return numba


def serialised(kernel: Callable) -> Callable:
    """``kernel`` (a ``parallel=True`` Numba function) called under :data:`LAUNCH_LOCK`;
    the compiled function is its ``dispatcher`` attribute."""
    lock = LAUNCH_LOCK

    def launch(*args: Any) -> Any:
        with lock:
            return kernel(*args)

    launch.dispatcher = kernel
    launch.__name__ = launch.__qualname__ = getattr(kernel, "__name__", "kernel")
    return launch


def njit_variant(fn: Any, variant: str, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)(fn)``, cached on disk under a name of its own;
    a ``parallel=True`` kernel comes :func:`serialised`.

    Numba's disk cache is keyed by a function's qualified name and signature, so two
    kernels made by one factory (one thread and ``parallel=True``, or per dtype with the
    same argument types) would share an entry; ``variant`` makes the names distinct.
    """
    fn.__qualname__ = f"{fn.__qualname__}_{variant}"
    fn.__name__ = f"{fn.__name__}_{variant}"
    kernel = import_numba().njit(cache=True, **options)(fn)
    return serialised(kernel) if options.get("parallel") else kernel


def compile_loop(fn: Any, parallel: bool, helpers: Sequence[Callable] = (),
                 **options: Any) -> Any:
    """``fn`` compiled with its module-level name ``_prange`` bound to ``numba.prange``
    (``parallel``: its loop spread over the cores) or ``range`` (one core); ``options``
    go to ``numba.njit`` (``error_model="numpy"``: a division by zero gives inf/NaN;
    ``fastmath={"contract"}``: fused multiply-adds, for the inlined helpers too).

    Kernel modules (``functx.primitives._lu_kernels``, ``..elementwise._erf32``) write their
    outer loop as ``for i in _prange(n)`` with ``_prange = range`` at module level, so the
    functions import no Numba and run as plain Python too; this makes the variant's copy
    (its own globals, its own disk-cache name) and compiles it.

    ``helpers``: module-level plain-Python functions that ``fn`` (or another helper) calls
    by name (a scalar formula shared by several loops); in the copy's globals each name is
    bound to the function compiled with ``inline="always"``, so it is inlined into the loop
    (and vectorised with it). Keep helpers in ``fn``'s own module: Numba's disk cache
    checks only the source file of the function it compiles, so an edit elsewhere would
    not recompile ``fn``.
    """
    numba = numba_or_none()
    glb = dict(fn.__globals__)
    glb["_prange"] = numba.prange if parallel else range
    for helper in helpers:  # copies on the same globals: helpers may call each other
        copy = types.FunctionType(helper.__code__, glb, helper.__name__, helper.__defaults__)
        glb[helper.__name__] = numba.njit(inline="always")(copy)
    copy = types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__)
    copy.__module__ = fn.__module__
    copy.__qualname__ = fn.__qualname__
    return njit_variant(copy, "par" if parallel else "seq", parallel=parallel, **options)
