/* lazytorch: a float32 matrix product for linear layers on few rows, built once at install.
 *
 * c (m x n) = a (m x k) @ wᵀ, w (n x k) as torch stores a linear layer's weight, row-major with
 * leading dims lda, ldw, ldc.  numpy's OpenBLAS is slow at this shape when m is small (MiniLM's 55
 * rows: 80-95 GFLOP/s on one core where this kernel does 124-137 and the machine's peak is ~160;
 * docs/benchmarks.md "Linear layers on few rows"), so the cpu backend's product helper (shaders/c_gemm.c.j2) calls this kernel instead,
 * through a function pointer, for the shapes runtime/library.py picks (`ROWS_RANGE`).
 *
 * The product is computed as its transpose, cᵀ = w @ aᵀ, BLIS style: the few rows of `a` are packed
 * once into panels of NR (32) rows, transposed so that each k holds NR row values side by side
 * (two AVX-512 vectors); the micro-kernel multiplies MR (12) rows of w, read in place one
 * broadcast value at a time, by one panel, keeping the 12 x 32 block of cᵀ in 24 registers over a
 * KC-long stretch of k, and at the last stretch writes it into c through 16 x 16 register
 * transposes (so neither w nor c is ever copied).  Longer k is cut into KC stretches whose partial
 * blocks wait in a cᵀ scratch.  A last panel of 16 rows or fewer uses one vector.
 *
 * Built for x86-64 with GCC or Clang (target attributes: no -march flag needed, the install works
 * on any x86-64); `lt_rows_available()` tells at run time whether the CPU has AVX-512.  Elsewhere
 * the file builds to a stub that reports 0, and the helper keeps calling the BLAS.  It is a Python
 * extension module only so that setup.py builds it: runtime/library.py loads it with ctypes. */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define LT_AVX512 __attribute__((target("avx512f,fma")))
#define LT_KERNEL static inline __attribute__((always_inline, target("avx512f,fma")))

enum { MR = 12, NR = 32, KC = 384 };

/* r[0..15] transposed in registers (4 rounds of unpacks and lane shuffles) */
LT_KERNEL void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* rows row0.. of a (those < m; the rest zero) packed as panel p-major: dst[p * width + j] =
 * a[row0 + j][p], j < width (16 or 32), in 16 x 16 blocks */
LT_KERNEL void pack(const float *a, int64_t lda, int64_t m, int64_t row0, int64_t k, int width, float *dst) {
    int64_t k16 = k / 16 * 16;
    for (int j0 = 0; j0 < width; j0 += 16) {
        int64_t base = row0 + j0;
        for (int64_t p0 = 0; p0 < k16; p0 += 16) {
            __m512 r[16];
            for (int j = 0; j < 16; j++)
                r[j] = base + j < m ? _mm512_loadu_ps(a + (base + j) * lda + p0) : _mm512_setzero_ps();
            transpose16(r);
            for (int p = 0; p < 16; p++)
                _mm512_store_ps(dst + (p0 + p) * width + j0, r[p]);
        }
        for (int64_t p = k16; p < k; p++)
            for (int j = 0; j < 16; j++)
                dst[p * width + j0 + j] = base + j < m ? a[(base + j) * lda + p] : 0.0f;
    }
}

/* One block: acc[i][v] = Σ_p w[i * ldw + p] * panel[p * 16 nv + 16 v ..], p < kc, for the MR rows of
 * w, plus the partial block in `part` (row stride `pld`) unless `first`.  Not `last`: the block goes
 * back to `part`.  Last: it is written transposed into c (c[j][i] for the `rows` valid rows j of the
 * panel and the `cols` valid rows i of w) */
LT_KERNEL void block(int nv, int64_t kc, const float *w, int64_t ldw, const float *panel, float *part,
                     int64_t pld, int first, int last, float *c, int64_t ldc, int64_t rows, int cols) {
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++)
        for (int v = 0; v < nv; v++)
            acc[i][v] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + i * pld + 16 * v);
    for (int64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(panel + p * 16 * nv);
        __m512 b1 = nv == 2 ? _mm512_load_ps(panel + p * 32 + 16) : b0;
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512 x = _mm512_set1_ps(w[i * ldw + p]);
            acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
            if (nv == 2)
                acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
        }
    }
    if (!last) {
        for (int i = 0; i < MR; i++)
            for (int v = 0; v < nv; v++)
                _mm512_store_ps(part + i * pld + 16 * v, acc[i][v]);
        return;
    }
    __mmask16 mask = (__mmask16)((1u << cols) - 1);
    for (int v = 0; v < nv; v++) {
        __m512 r[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < MR ? acc[i][v] : _mm512_setzero_ps();
        transpose16(r);
        for (int j = 0; j < 16 && 16 * v + j < rows; j++)
            _mm512_mask_storeu_ps(c + (16 * v + j) * ldc, mask, r[j]);
    }
}

/* each thread's packed panels and partial blocks, grown as needed (kept: the same shapes come
 * every call) */
static __thread float *scratch_at;
static __thread int64_t scratch_floats;

LT_AVX512 static float *scratch(int64_t floats) {
    if (floats > scratch_floats) {
        free(scratch_at);
        scratch_at = aligned_alloc(64, (size_t)((floats + 15) / 16 * 64));
        scratch_floats = scratch_at ? floats : 0;
    }
    return scratch_at;
}

/* the panel of rows row0.. (width 32, or 16 for a last one of at most 16 rows) */
static int panel_width(int64_t m, int64_t row0) { return m - row0 <= 16 ? 16 : NR; }

/* c = a @ wᵀ (see the top); 0 where the scratch could not be allocated (nothing written: the
 * caller computes the product another way) */
LT_AVX512 int lt_rows_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *w,
                          int64_t ldw, float *c, int64_t ldc) {
    if (m <= 0 || n <= 0)
        return 1;
    if (k <= 0) {
        for (int64_t j = 0; j < m; j++)
            memset(c + j * ldc, 0, (size_t)n * sizeof(float));
        return 1;
    }
    int64_t mpad = (m + 15) / 16 * 16, blocks = (n + MR - 1) / MR;
    int64_t parts = k > KC ? blocks * MR * mpad : 0;
    float *packed = scratch(mpad * k + parts + MR * KC), *part = packed + mpad * k, *edge = part + parts;
    if (!packed)
        return 0;
    for (int64_t row0 = 0; row0 < m; row0 += NR)              /* panel at row0 starts at row0 * k */
        pack(a, lda, m, row0, k, panel_width(m, row0), packed + row0 * k);
    for (int64_t p0 = 0; p0 < k; p0 += KC) {
        int64_t kc = k - p0 < KC ? k - p0 : KC;
        int first = p0 == 0, last = p0 + kc == k;
        for (int64_t b = 0; b < blocks; b++) {
            int64_t i0 = b * MR, cols = n - i0 < MR ? n - i0 : MR;
            const float *wb = w + i0 * ldw + p0;
            int64_t wld = ldw;
            if (cols < MR) {        /* the last rows of w, the missing ones repeating the last one */
                for (int i = 0; i < MR; i++)
                    memcpy(edge + i * KC, w + (i0 + (i < cols ? i : cols - 1)) * ldw + p0, (size_t)kc * sizeof(float));
                wb = edge;
                wld = KC;
            }
            for (int64_t row0 = 0; row0 < m; row0 += NR) {
                int nv = panel_width(m, row0) / 16;
                const float *panel = packed + row0 * k + p0 * 16 * nv;
                float *pb = parts ? part + i0 * mpad + row0 : 0;
                float *cb = c + row0 * ldc + i0;
                if (nv == 2)
                    block(2, kc, wb, wld, panel, pb, mpad, first, last, cb, ldc, m - row0, (int)cols);
                else
                    block(1, kc, wb, wld, panel, pb, mpad, first, last, cb, ldc, m - row0, (int)cols);
            }
        }
    }
    return 1;
}

int lt_rows_available(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}
#else
int lt_rows_f32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *w, int64_t ldw,
                float *c, int64_t ldc) {
    return 0;
}

int lt_rows_available(void) { return 0; }
#endif

static struct PyModuleDef rows_module = {PyModuleDef_HEAD_INIT, "_rows",
                                         "lazytorch's float32 product on few rows (ctypes loads it)", -1, NULL};

PyMODINIT_FUNC PyInit__rows(void) { return PyModule_Create(&rows_module); }
