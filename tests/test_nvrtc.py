"""The cuda backend's ahead-of-time compiles (runtime/nvrtc.py) checked without a GPU: a stand-in
libnvrtc built from C here "compiles" a source into a cubin that is the source's bytes reversed
and rejects sources containing `#error`, so batching, worker processes, the disk cache and error
reports run as they do against NVIDIA's library.  The real NVRTC runs in the GPU suite
(`LAZYTORCH_TEST_BACKENDS=cuda`: every cuda kernel launched there was compiled by it)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from lazytorch.runtime import nvrtc
from lazytorch.runtime.compiler import KernelCompileError

FAKE = r"""
#include <stdlib.h>
#include <string.h>
typedef struct { char *src, *log; size_t n; } prog_t;
int nvrtcCreateProgram(prog_t **p, const char *src, const char *name, int nh, const char **h, const char **hn) {
    *p = calloc(1, sizeof(prog_t)); (*p)->src = strdup(src); (*p)->n = strlen(src); return 0; }
int nvrtcCompileProgram(prog_t *p, int n, const char **opts) {
    if (n < 1 || strncmp(opts[0], "--gpu-architecture=", 19)) { p->log = strdup("no architecture"); return 6; }
    if (strstr(p->src, "#error")) { p->log = strdup("fake.cu(1): error: #error directive"); return 6; }
    for (size_t i = 0; i < p->n / 2; i++) { char c = p->src[i]; p->src[i] = p->src[p->n - 1 - i]; p->src[p->n - 1 - i] = c; }
    return 0; }
int nvrtcGetCUBINSize(prog_t *p, size_t *s) { *s = p->n; return 0; }
int nvrtcGetCUBIN(prog_t *p, char *out) { memcpy(out, p->src, p->n); return 0; }
int nvrtcGetProgramLogSize(prog_t *p, size_t *s) { *s = p->log ? strlen(p->log) + 1 : 1; return 0; }
int nvrtcGetProgramLog(prog_t *p, char *out) { strcpy(out, p->log ? p->log : ""); return 0; }
int nvrtcDestroyProgram(prog_t **p) { free((*p)->src); free((*p)->log); free(*p); *p = 0; return 0; }
const char *nvrtcGetErrorString(int r) { return "fake error"; }
int nvrtcVersion(int *a, int *b) { *a = 99; *b = 0; return 0; }
"""


@pytest.fixture
def fake_nvrtc(tmp_path_factory, tmp_path, monkeypatch):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    lib = tmp_path_factory.mktemp("fake_nvrtc") / "libnvrtc_fake.so"
    src = lib.with_suffix(".c")
    src.write_text(FAKE)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    monkeypatch.setattr(nvrtc, "library_names", lambda stem: (str(lib),))
    monkeypatch.setattr(nvrtc, "_libraries", lambda: (nvrtc.worker.load([str(lib)]), None))
    monkeypatch.setattr(nvrtc, "arch", lambda: "sm_90")
    monkeypatch.setattr(nvrtc, "version", lambda: "99.0")
    monkeypatch.setattr(nvrtc, "_options", lambda: ["--gpu-architecture=sm_90", "--std=c++17"])
    monkeypatch.setattr(nvrtc, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(nvrtc, "stats", {"compiled": 0, "disk_hits": 0, "seconds": 0.0})
    return tmp_path


def kernels(n: int, tag: str = "") -> list[tuple[str, str]]:
    return [(f'extern "C" __global__ void k{i}{tag}() {{ /* {i} */ }}\n', f"k{i}{tag}") for i in range(n)]


@pytest.mark.parametrize("count", [1, 2, 5])          # in this process (<= 2), or in worker processes
def test_batch_compiles_each_source_and_caches_it(fake_nvrtc, count):
    sources = kernels(count, tag=f"_{count}")
    cubins = nvrtc.compile_all(sources)
    assert cubins == [src.encode()[::-1] for src, _ in sources]
    assert nvrtc.stats["compiled"] == count and nvrtc.stats["disk_hits"] == 0
    assert len(list(fake_nvrtc.glob("cu-*.cubin"))) == count
    assert nvrtc.compile_all(sources) == cubins                       # the disk cache, no compile
    assert nvrtc.stats["compiled"] == count and nvrtc.stats["disk_hits"] == count
    assert not list(fake_nvrtc.glob(".nvrtc-*")) and not list(fake_nvrtc.glob("*.tmp-*"))


@pytest.mark.parametrize("count", [1, 4])
def test_rejected_source_raises_with_the_log_and_caches_nothing_for_it(fake_nvrtc, count):
    sources = kernels(count - 1, tag="_ok") + [("#error broken\n", "bad")]
    with pytest.raises(KernelCompileError, match=r"NVRTC failed on generated kernel bad:\n.*#error directive"):
        nvrtc.compile_all(sources)
    cached = list(fake_nvrtc.glob("cu-*"))
    assert len(cached) == count - 1 and all(p.suffix == ".cubin" for p in cached)
    assert nvrtc.compile_all(sources[:-1]) == [s.encode()[::-1] for s, _ in sources[:-1]]


def test_empty_batch_and_missing_library():
    assert nvrtc.compile_all([]) == []
    assert nvrtc.worker.load(["/nonexistent/libnvrtc.so"]) is None
