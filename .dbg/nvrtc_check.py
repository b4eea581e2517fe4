"""Compile the float32 flash kernels with NVRTC for sm_90 through raw_function's own
substitutions (a fake xp records the code it would hand to cupy.RawModule); print the log
(ptxas -v: registers, spills, shared memory) and fail on any error or warning."""
import ctypes, sys
sys.path.insert(0, ".")  # run from the repository root
import numpy as np
from functx.primitives.cuda import _flash32, _kernels

codes = []

class FakeModule:
    def __init__(self, code):
        codes.append(code)
    def get_function(self, name):
        assert name in codes[-1], name
        return name

class FakeXp:
    RawModule = FakeModule

for kind in ("fwd", "bwd"):
    for e in _flash32.HEAD_DIMS:
        _flash32._function(FakeXp, kind, e)
assert len(codes) == 1, len(codes)
code = codes[0]
for bad in ("CTYPE", "STYPE", "NEG_INF", "LOAD_STORE"):
    assert bad not in _flash32.source(), bad
lib = ctypes.CDLL("/tmp/nvrtc-lib/nvidia/cu13/lib/libnvrtc.so.13")
ok = True
for extra in ([b"-std=c++11"], [b"-std=c++14"], [b"-std=c++17"], [b"--gpu-architecture=compute_90"], []):
    src = code.encode()
    prog = ctypes.c_void_p()
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"flash32.cu", 0, None, None)
    assert r == 0, r
    opts = [b"--gpu-architecture=sm_90", b"-Xptxas=-v", b"-Xptxas=-warn-spills", b"-Xptxas=-warn-lmem-usage"] + extra
    arr = (ctypes.c_char_p * len(opts))(*opts)
    r = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    text = log.value.decode()
    if extra == [] or r != 0:
        print(f"== opts {extra} rc={r}\n{text}")
    else:
        print(f"== opts {extra} rc={r}")
    if r != 0 or "warning" in text.lower() or "error" in text.lower():
        ok = False
        print(text)
print("OK" if ok else "FAILED")
sys.exit(0 if ok else 1)
