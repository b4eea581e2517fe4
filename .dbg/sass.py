"""Compile the float32 flash kernels to a cubin for sm_90 (NVRTC) and dump per-kernel
SASS instruction counts (cuobjdump)."""
import ctypes, subprocess, sys, collections, re
sys.path.insert(0, ".")  # run from the repository root
from functx.primitives.cuda import _flash32
lib = ctypes.CDLL("/tmp/nvrtc-lib/nvidia/cu13/lib/libnvrtc.so.13")
src = _flash32.source().encode()
prog = ctypes.c_void_p()
lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"f.cu", 0, None, None)
opts = [b"--gpu-architecture=sm_90"]
arr = (ctypes.c_char_p * len(opts))(*opts)
assert lib.nvrtcCompileProgram(prog, len(opts), arr) == 0
n = ctypes.c_size_t(); lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
buf = ctypes.create_string_buffer(n.value); lib.nvrtcGetCUBIN(prog, buf)
open("/tmp/f32.cubin", "wb").write(buf.raw)
out = subprocess.run(["/tmp/cuobjdump/nvidia/cu13/bin/cuobjdump", "-sass", "/tmp/f32.cubin"], capture_output=True, text=True, env={"PATH": "/tmp/nvdisasm/nvidia/cu13/bin:/usr/bin:/bin"}).stdout
open("/tmp/f32.sass", "w").write(out)
for fn, body in re.findall(r"Function : (\S+)\n(.*?)(?=\n\s*Function :|\Z)", out, re.S):
    c = collections.Counter()
    for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", body):
        c[m.group(1)] += 1
    keys = ["FFMA", "FMUL", "FADD", "LDS.128", "LDS.64", "LDS", "STS", "STS.128", "LDGSTS.E.BYPASS.128", "BAR.SYNC.DEFER_BLOCKING", "MUFU.EX2", "SHFL.BFLY", "RED.E.ADD.F32.FTZ.RN.STRONG.GPU", "ATOM", "LDL", "STL"]
    print(fn, {k: c[k] for k in keys if c[k]}, "| other atomics:", {k: v for k, v in c.items() if "RED" in k or "ATOM" in k})
