// metal_shim.h: the Metal Shading Language subset lazytorch's Metal kernels use, as C++17, so the
// metal-emu backend can compile the exact source the metal backend launches with g++ and run it on
// the CPU.  It also stands in for the prelude the Metal runtime prepends to a custom kernel
// (bfloat16_t/float16_t and `using namespace metal`).
//
// Execution model: every threadgroup runs its threads as fibers on one OS thread.  A thread runs
// until it reaches a threadgroup_barrier or a simd_* collective, then the scheduler switches to the
// next thread, so barriers really synchronise (a missing barrier shows up as a wrong result) and a
// simd_* op sees the values of all active lanes of its simdgroup (32 lanes).  Kernels with neither
// run their threads one after another without fibers.
//
// Only what Metal itself provides belongs here: a kernel that compiles against this shim but uses a
// function Metal lacks (erf, log1p, expm1 ...) would fail on a Mac, so those are not defined.
#pragma once
#undef _FORTIFY_SOURCE  // _longjmp between fiber stacks must not be checked against one stack
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

// ---------------------------------------------------------------- address spaces, attributes
// Device and constant memory are host memory; `threadgroup` variables are shared by the threads of
// one threadgroup, and threadgroups run one at a time, so a static local is exactly that.
// (A `threadgroup T*` pointer variable would become static too: kernels only declare arrays.)
#ifndef LT_STRICT_ADDRESS_SPACES
#define device
#define constant
#define thread
#define threadgroup static
#else
// The strict front-end check (tests/test_metal_strict.py, clang -fsyntax-only): Metal's address
// spaces as distinct clang address spaces, so a pointer passed across them, or a buffer pointer
// missing its `device`/`constant` qualifier, is a type error as on Apple's compiler.
#define device __attribute__((address_space(1)))
#define constant __attribute__((address_space(2)))
#define thread
#define threadgroup static __attribute__((address_space(3)))
#endif
#pragma GCC diagnostic ignored "-Wattributes"  // [[kernel]], [[buffer(i)]], [[host_name(..)]]

// ---------------------------------------------------------------- scalar types
#ifdef LT_STRICT_ADDRESS_SPACES
// The strict check only type-checks.  C++ cannot assign a struct through an address-space pointer
// (its operator= takes a generic `this`), so the 16-bit float types are distinct builtin 16-bit
// types here; kernels compute in float, so only their loads, stores and casts are checked.
typedef short half;
#define LT_STRICT_BFLOAT
#else
typedef _Float16 half;
#endif
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

#ifdef LT_STRICT_BFLOAT
typedef unsigned short bfloat;
#else
// bfloat: 16 raw bits; computes as float and rounds to nearest even when stored (NaN stays quiet).
struct bfloat {
  uint16_t bits;
  bfloat() = default;
  template <class T, class = std::enable_if_t<std::is_convertible<T, float>::value &&
                                              !std::is_same<std::decay_t<T>, bfloat>::value>>
  bfloat(T v) : bits(round_bits(float(v))) {}
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  static uint16_t round_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
    return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  bfloat& operator+=(float o) { return *this = float(*this) + o; }
  bfloat& operator-=(float o) { return *this = float(*this) - o; }
  bfloat& operator*=(float o) { return *this = float(*this) * o; }
  bfloat& operator/=(float o) { return *this = float(*this) / o; }
};
#endif
typedef half float16_t;
typedef bfloat bfloat16_t;

// ---------------------------------------------------------------- vector types
template <class T, int N> struct lt_vec_storage;
template <class T> struct lt_vec_storage<T, 2> { T x, y; };
template <class T> struct lt_vec_storage<T, 3> { T x, y, z; };
template <class T> struct lt_vec_storage<T, 4> { T x, y, z, w; };

template <class T, int N>
struct vec : lt_vec_storage<T, N> {
  vec() = default;
  vec(T s) { for (int i = 0; i < N; i++) (*this)[i] = s; }
  template <class... A, class = std::enable_if_t<sizeof...(A) == N && (N > 1)>>
  vec(A... a) {
    T v[] = {T(a)...};
    for (int i = 0; i < N; i++) (*this)[i] = v[i];
  }
  template <class U> explicit vec(const vec<U, N>& o) { for (int i = 0; i < N; i++) (*this)[i] = T(o[i]); }
  T& operator[](int i) { return (&this->x)[i]; }
  const T& operator[](int i) const { return (&this->x)[i]; }
};
#define LT_VEC_BINOP(op)                                                                   \
  template <class T, int N> vec<T, N> operator op(vec<T, N> a, vec<T, N> b) {              \
    vec<T, N> r; for (int i = 0; i < N; i++) r[i] = a[i] op b[i]; return r; }              \
  template <class T, int N> vec<T, N> operator op(vec<T, N> a, T b) { return a op vec<T, N>(b); } \
  template <class T, int N> vec<T, N> operator op(T a, vec<T, N> b) { return vec<T, N>(a) op b; } \
  template <class T, int N> vec<T, N>& operator op##=(vec<T, N>& a, vec<T, N> b) { return a = a op b; }
LT_VEC_BINOP(+) LT_VEC_BINOP(-) LT_VEC_BINOP(*) LT_VEC_BINOP(/)
#undef LT_VEC_BINOP

#define LT_VEC_TYPES(T, name) typedef vec<T, 2> name##2; typedef vec<T, 3> name##3; typedef vec<T, 4> name##4;
LT_VEC_TYPES(float, float) LT_VEC_TYPES(half, half) LT_VEC_TYPES(bfloat, bfloat)
LT_VEC_TYPES(int, int) LT_VEC_TYPES(uint, uint) LT_VEC_TYPES(short, short) LT_VEC_TYPES(ushort, ushort)
LT_VEC_TYPES(char, char) LT_VEC_TYPES(uchar, uchar) LT_VEC_TYPES(long, long) LT_VEC_TYPES(ulong, ulong)
LT_VEC_TYPES(bool, bool)
#undef LT_VEC_TYPES

// ---------------------------------------------------------------- the metal namespace: math
namespace metal {

template <class T, class U> inline T as_type(U u) {
  static_assert(sizeof(T) == sizeof(U), "as_type needs types of one size");
  T t;
  std::memcpy(&t, &u, sizeof(T));
  return t;
}

template <class T> struct numeric_limits : std::numeric_limits<T> {};
template <> struct numeric_limits<half> {
  static constexpr bool is_specialized = true;
  static half infinity() { return half(__builtin_inff()); }
  static half quiet_NaN() { return half(__builtin_nanf("")); }
  static half max() { return half(65504.0f); }
  static half lowest() { return half(-65504.0f); }
  static half min() { return half(6.103515625e-05f); }
  static half epsilon() { return half(0.0009765625f); }
};
#ifndef LT_STRICT_BFLOAT
template <> struct numeric_limits<bfloat> {
  static constexpr bool is_specialized = true;
  static bfloat infinity() { return bfloat(__builtin_inff()); }
  static bfloat quiet_NaN() { return bfloat(__builtin_nanf("")); }
  static bfloat max() { bfloat b; b.bits = 0x7F7F; return b; }
  static bfloat lowest() { bfloat b; b.bits = 0xFF7F; return b; }
  static bfloat min() { bfloat b; b.bits = 0x0080; return b; }
  static bfloat epsilon() { bfloat b; b.bits = 0x3C00; return b; }
};
#endif

// One definition per function for float, half and bfloat (half types compute in float) and
// element-wise for vectors.  The same set lives in metal::precise and metal::fast.
#define LT_UNARY(name, impl)                                                        \
  inline float name(float x) { return impl(x); }                                    \
  inline half name(half x) { return half(impl(float(x))); }                         \
  inline bfloat name(bfloat x) { return bfloat(impl(float(x))); }                   \
  template <class T, int N> inline vec<T, N> name(vec<T, N> v) {                    \
    vec<T, N> r; for (int i = 0; i < N; i++) r[i] = name(v[i]); return r; }
#define LT_BINARY(name, impl)                                                       \
  inline float name(float x, float y) { return impl(x, y); }                        \
  inline half name(half x, half y) { return half(impl(float(x), float(y))); }       \
  inline bfloat name(bfloat x, bfloat y) { return bfloat(impl(float(x), float(y))); } \
  template <class T, int N> inline vec<T, N> name(vec<T, N> a, vec<T, N> b) {       \
    vec<T, N> r; for (int i = 0; i < N; i++) r[i] = name(a[i], b[i]); return r; }
#define LT_PREDICATE(name, impl)                                                    \
  inline bool name(float x) { return impl(x); }                                     \
  inline bool name(half x) { return impl(float(x)); }                               \
  inline bool name(bfloat x) { return impl(float(x)); }

inline float lt_rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float lt_exp10(float x) { return std::pow(10.0f, x); }
inline float lt_fract(float x) { return x - std::floor(x); }
inline float lt_sign(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x == 0 ? 0.0f : x; }
inline float lt_powr(float x, float y) { return std::pow(x, y); }

#define LT_MATH_FUNCTIONS                                                                        \
  LT_UNARY(exp, std::exp) LT_UNARY(exp2, std::exp2) LT_UNARY(exp10, lt_exp10)                  \
  LT_UNARY(log, std::log) LT_UNARY(log2, std::log2) LT_UNARY(log10, std::log10)                \
  LT_UNARY(sqrt, std::sqrt) LT_UNARY(rsqrt, lt_rsqrt)                                           \
  LT_UNARY(sin, std::sin) LT_UNARY(cos, std::cos) LT_UNARY(tan, std::tan)                       \
  LT_UNARY(asin, std::asin) LT_UNARY(acos, std::acos) LT_UNARY(atan, std::atan)                 \
  LT_UNARY(sinh, std::sinh) LT_UNARY(cosh, std::cosh) LT_UNARY(tanh, std::tanh)                 \
  LT_UNARY(asinh, std::asinh) LT_UNARY(acosh, std::acosh) LT_UNARY(atanh, std::atanh)           \
  LT_UNARY(floor, std::floor) LT_UNARY(ceil, std::ceil) LT_UNARY(round, std::round)             \
  LT_UNARY(rint, std::rint) LT_UNARY(trunc, std::trunc) LT_UNARY(fabs, std::fabs)               \
  LT_UNARY(fract, lt_fract) LT_UNARY(sign, lt_sign)                                             \
  LT_BINARY(pow, std::pow) LT_BINARY(powr, lt_powr) LT_BINARY(atan2, std::atan2)                \
  LT_BINARY(fmod, std::fmod) LT_BINARY(fmax, std::fmax) LT_BINARY(fmin, std::fmin)              \
  LT_BINARY(copysign, std::copysign)

LT_MATH_FUNCTIONS
namespace precise { LT_MATH_FUNCTIONS }
namespace fast { LT_MATH_FUNCTIONS }

LT_PREDICATE(isnan, std::isnan) LT_PREDICATE(isinf, std::isinf)
LT_PREDICATE(isfinite, std::isfinite) LT_PREDICATE(signbit, std::signbit)

// abs: std's integer and float overloads plus half/bfloat.
using std::abs;
inline half abs(half x) { return half(std::fabs(float(x))); }
inline bfloat abs(bfloat x) { return bfloat(std::fabs(float(x))); }

// min/max/clamp/select/mix/fma: generic over one type (Metal requires both operands alike).
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
template <class T> inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <class T> inline T select(T a, T b, bool c) { return c ? b : a; }
template <class T> inline T mix(T x, T y, T a) { return x + (y - x) * a; }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline half fma(half a, half b, half c) { return half(std::fma(float(a), float(b), float(c))); }
inline bfloat fma(bfloat a, bfloat b, bfloat c) { return bfloat(std::fma(float(a), float(b), float(c))); }

#undef LT_MATH_FUNCTIONS
#undef LT_UNARY
#undef LT_BINARY
#undef LT_PREDICATE

enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };

}  // namespace metal

// ---------------------------------------------------------------- the fiber scheduler
namespace lt_emu {

constexpr int kSimdWidth = 32;
constexpr int kMaxThreads = 1024;
constexpr int kMaxSimdgroups = kMaxThreads / kSimdWidth;
constexpr size_t kStackSize = 64 * 1024;
constexpr int kSlotBytes = 16;

// The built-in attribute values of one thread, named as the Metal attributes.
struct Attrs {
  vec<uint, 3> thread_position_in_grid, thread_position_in_threadgroup, threadgroup_position_in_grid;
  vec<uint, 3> threads_per_threadgroup, threadgroups_per_grid, threads_per_grid, grid_size, grid_origin;
  vec<uint, 3> dispatch_threads_per_threadgroup;
  uint thread_index_in_threadgroup, simdgroup_index_in_threadgroup, thread_index_in_simdgroup;
  uint simdgroups_per_threadgroup, threads_per_simdgroup, thread_execution_width;
  uint dispatch_simdgroups_per_threadgroup;
  uint quadgroup_index_in_threadgroup, thread_index_in_quadgroup, quadgroups_per_threadgroup;
  uint dispatch_quadgroups_per_threadgroup;
};

typedef void (*ThreadFn)(void** args, const Attrs& a);

enum State { READY, AT_BARRIER, AT_SIMD, DONE };

struct Fiber {
  Attrs attrs;
  State state;
  bool started;
  jmp_buf jb;
  ucontext_t uc;
};

struct Scheduler {
  Fiber fibers[kMaxThreads];
  int n = 0, cur = -1;
  jmp_buf main_jb;
  jmp_buf escape;  // a launch without fibers that meets a barrier or simd op returns through here
  char* stacks = nullptr;
  ThreadFn fn = nullptr;
  void** args = nullptr;
  // simd exchange: each lane writes `slot`; when every live fiber is blocked the scheduler copies
  // the slots of lanes waiting at a simd op into `snap` (with their mask) and lets them read it.
  unsigned char slot[kMaxSimdgroups][kSimdWidth][kSlotBytes];
  unsigned char snap[kMaxSimdgroups][kSimdWidth][kSlotBytes];
  uint32_t mask[kMaxSimdgroups];
};
static Scheduler S;

inline void yield_to_scheduler(State s) {
  if (S.cur < 0) _longjmp(S.escape, 1);
  Fiber& f = S.fibers[S.cur];
  f.state = s;
  if (!_setjmp(f.jb)) _longjmp(S.main_jb, 1);
}

static void fiber_main() {
  for (;;) {  // a fiber is reused for the same thread index in every threadgroup
    Fiber& f = S.fibers[S.cur];
    S.fn(S.args, f.attrs);
    yield_to_scheduler(DONE);
  }
}

inline void resume(int i) {
  Fiber& f = S.fibers[i];
  S.cur = i;
  if (_setjmp(S.main_jb)) return;
  if (!f.started) {
    f.started = true;
    getcontext(&f.uc);
    f.uc.uc_stack.ss_sp = S.stacks + size_t(i) * kStackSize;
    f.uc.uc_stack.ss_size = kStackSize;
    f.uc.uc_link = nullptr;
    makecontext(&f.uc, fiber_main, 0);
    setcontext(&f.uc);
  }
  _longjmp(f.jb, 1);
}

// Runs one threadgroup of n fibers to completion.
inline void run_threadgroup(int n) {
  for (;;) {
    for (int i = 0; i < n; i++)
      if (S.fibers[i].state == READY) resume(i);
    bool simd = false, barrier = false;
    for (int i = 0; i < n; i++) {
      simd |= S.fibers[i].state == AT_SIMD;
      barrier |= S.fibers[i].state == AT_BARRIER;
    }
    if (simd) {  // simd collectives resolve first: lanes at a barrier wait for the others
      for (int g = 0; g < kMaxSimdgroups; g++) S.mask[g] = 0;
      for (int i = 0; i < n; i++) {
        if (S.fibers[i].state != AT_SIMD) continue;
        int g = i / kSimdWidth, l = i % kSimdWidth;
        S.mask[g] |= 1u << l;
        std::memcpy(S.snap[g][l], S.slot[g][l], kSlotBytes);
        S.fibers[i].state = READY;
      }
    } else if (barrier) {
      for (int i = 0; i < n; i++)
        if (S.fibers[i].state == AT_BARRIER) S.fibers[i].state = READY;
    } else {
      return;
    }
  }
}

inline uint lin(vec<uint, 3> p, vec<uint, 3> size) { return p.x + size.x * (p.y + size.y * p.z); }

// Launches fn over `grid` threads in threadgroups of `tg` threads (edge threadgroups are partial,
// as with dispatchThreads).  Returns 0; -1 when the threadgroup is too large; -3 when a launch with
// sync=0 reached a barrier or simd op (the caller runs it again with sync=1).
inline int dispatch(ThreadFn fn, void** args, const uint* grid3, const uint* tg3, int sync) {
  vec<uint, 3> grid(grid3[0], grid3[1], grid3[2]), tg;
  for (int d = 0; d < 3; d++) tg[d] = tg3[d] < grid[d] ? tg3[d] : grid[d];
  if (tg.x * tg.y * tg.z > uint(kMaxThreads)) return -1;
  if (sync && !S.stacks) {
    void* p = mmap(nullptr, kStackSize * kMaxThreads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return -2;
    S.stacks = static_cast<char*>(p);
  }
  vec<uint, 3> groups;
  for (int d = 0; d < 3; d++) groups[d] = (grid[d] + tg[d] - 1) / tg[d];
  S.fn = fn;
  S.args = args;
  S.cur = -1;
  for (int i = 0; i < kMaxThreads; i++) S.fibers[i].started = false;
  if (!sync && _setjmp(S.escape)) return -3;
  Attrs a{};
  a.threadgroups_per_grid = groups;
  a.threads_per_grid = a.grid_size = grid;
  a.grid_origin = vec<uint, 3>(0u);
  a.dispatch_threads_per_threadgroup = tg;
  a.threads_per_simdgroup = a.thread_execution_width = kSimdWidth;
  vec<uint, 3> g;
  for (g.z = 0; g.z < groups.z; g.z++)
    for (g.y = 0; g.y < groups.y; g.y++)
      for (g.x = 0; g.x < groups.x; g.x++) {
        vec<uint, 3> size;  // this threadgroup's size: partial at the grid's edge
        for (int d = 0; d < 3; d++) size[d] = grid[d] - g[d] * tg[d] < tg[d] ? grid[d] - g[d] * tg[d] : tg[d];
        uint n = size.x * size.y * size.z;
        a.threadgroup_position_in_grid = g;
        a.threads_per_threadgroup = size;
        a.simdgroups_per_threadgroup = (n + kSimdWidth - 1) / kSimdWidth;
        a.dispatch_simdgroups_per_threadgroup = (tg.x * tg.y * tg.z + kSimdWidth - 1) / kSimdWidth;
        a.quadgroups_per_threadgroup = (n + 3) / 4;
        a.dispatch_quadgroups_per_threadgroup = (tg.x * tg.y * tg.z + 3) / 4;
        vec<uint, 3> t;
        for (t.z = 0; t.z < size.z; t.z++)
          for (t.y = 0; t.y < size.y; t.y++)
            for (t.x = 0; t.x < size.x; t.x++) {
              uint i = lin(t, size);
              a.thread_position_in_threadgroup = t;
              a.thread_position_in_grid = g * tg + t;
              a.thread_index_in_threadgroup = i;
              a.simdgroup_index_in_threadgroup = i / kSimdWidth;
              a.thread_index_in_simdgroup = i % kSimdWidth;
              a.quadgroup_index_in_threadgroup = i / 4;
              a.thread_index_in_quadgroup = i % 4;
              if (sync) {
                S.fibers[i].attrs = a;
                S.fibers[i].state = READY;
              } else {
                fn(args, a);
              }
            }
        if (sync) run_threadgroup(int(n));
      }
  S.cur = -1;
  return 0;
}

// ---- simd collectives: write own value, block until the simdgroup's active lanes all did
template <class T> inline void put(const T& v) {
  static_assert(sizeof(T) <= kSlotBytes, "simd value too large");
  int i = S.cur;
  std::memcpy(S.slot[i / kSimdWidth][i % kSimdWidth], &v, sizeof(T));
  yield_to_scheduler(AT_SIMD);
}
template <class T> inline T lane_value(int lane) {
  T v;
  std::memcpy(&v, S.snap[S.cur / kSimdWidth][lane], sizeof(T));
  return v;
}
inline uint32_t active_mask() { return S.mask[S.cur / kSimdWidth]; }
inline int own_lane() { return S.cur % kSimdWidth; }

template <class T, class Op> inline T reduce(T v, Op op, int upto = kSimdWidth, bool inclusive = true) {
  put(v);
  uint32_t m = active_mask();
  bool have = false;
  T acc{};
  for (int l = 0; l < upto + (inclusive ? 1 : 0) && l < kSimdWidth; l++) {
    if (!(m >> l & 1u)) continue;
    T x = lane_value<T>(l);
    acc = have ? op(acc, x) : x;
    have = true;
  }
  return acc;
}
template <class T> inline T shuffle_from(T v, int src) {
  put(v);
  if (src < 0 || src >= kSimdWidth || !(active_mask() >> src & 1u)) return v;
  return lane_value<T>(src);
}

}  // namespace lt_emu

namespace metal {
inline void threadgroup_barrier(mem_flags) {
  lt_emu::yield_to_scheduler(lt_emu::AT_BARRIER);
}
inline void simdgroup_barrier(mem_flags) { lt_emu::put(0); }

// Device atomics and fences, as the rows template's grid combine uses them (one thread of each
// threadgroup takes a ticket; the last group folds every group's partial).  The emulator runs
// threadgroups one after another, so a plain read-modify-write is atomic and the fence orders nothing.
enum memory_order { memory_order_relaxed, memory_order_seq_cst };
enum class thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup, thread_scope_device };
constexpr thread_scope thread_scope_device = thread_scope::thread_scope_device;
typedef int atomic_int;
typedef unsigned atomic_uint;
template <class P, class T> inline T atomic_fetch_add_explicit(P p, T v, memory_order) {
  T old = *p;
  *p = old + v;
  return old;
}
inline void atomic_thread_fence(mem_flags, memory_order, thread_scope) {}

template <class T> inline T simd_sum(T v) { return lt_emu::reduce(v, [](T a, T b) { return T(a + b); }); }
template <class T> inline T simd_product(T v) { return lt_emu::reduce(v, [](T a, T b) { return T(a * b); }); }
template <class T> inline T simd_max(T v) { return lt_emu::reduce(v, [](T a, T b) { return max(a, b); }); }
template <class T> inline T simd_min(T v) { return lt_emu::reduce(v, [](T a, T b) { return min(a, b); }); }
template <class T> inline T simd_and(T v) { return lt_emu::reduce(v, [](T a, T b) { return T(a & b); }); }
template <class T> inline T simd_or(T v) { return lt_emu::reduce(v, [](T a, T b) { return T(a | b); }); }
template <class T> inline T simd_xor(T v) { return lt_emu::reduce(v, [](T a, T b) { return T(a ^ b); }); }
inline bool simd_all(bool v) { return lt_emu::reduce(v, [](bool a, bool b) { return a && b; }); }
inline bool simd_any(bool v) { return lt_emu::reduce(v, [](bool a, bool b) { return a || b; }); }
template <class T> inline T simd_prefix_inclusive_sum(T v) {
  return lt_emu::reduce(v, [](T a, T b) { return T(a + b); }, lt_emu::own_lane());
}
template <class T> inline T simd_prefix_exclusive_sum(T v) {
  int lane = lt_emu::own_lane();
  T r = lt_emu::reduce(v, [](T a, T b) { return T(a + b); }, lane, false);
  return lane == 0 ? T(0) : r;
}
template <class T> inline T simd_shuffle(T v, ushort lane) { return lt_emu::shuffle_from(v, lane); }
template <class T> inline T simd_broadcast(T v, ushort lane) { return lt_emu::shuffle_from(v, lane); }
template <class T> inline T simd_broadcast_first(T v) {
  lt_emu::put(v);
  uint32_t m = lt_emu::active_mask();
  return lt_emu::lane_value<T>(m ? __builtin_ctz(m) : lt_emu::own_lane());
}
template <class T> inline T simd_shuffle_down(T v, ushort d) { return lt_emu::shuffle_from(v, lt_emu::own_lane() + d); }
template <class T> inline T simd_shuffle_up(T v, ushort d) { return lt_emu::shuffle_from(v, lt_emu::own_lane() - d); }
template <class T> inline T simd_shuffle_xor(T v, ushort m) { return lt_emu::shuffle_from(v, lt_emu::own_lane() ^ m); }
inline bool simd_is_first() {
  lt_emu::put(0);
  uint32_t m = lt_emu::active_mask();
  return m && __builtin_ctz(m) == lt_emu::own_lane();
}
}  // namespace metal

// The Metal runtime's prelude for custom kernels brings the metal namespace into scope.
using namespace metal;
