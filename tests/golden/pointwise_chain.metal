// lazytorch Metal kernel header: the helpers Metal's standard library lacks (erf, expm1, log1p,
// torch's division and NaN-propagating max/min) and 64-bit simd shuffles.  float math is precise.
inline float lt_expm1_f32(float x) {
    float u = metal::precise::exp(x);
    if (u == 1.0f) return x;
    float um1 = u - 1.0f;
    if (um1 == -1.0f) return -1.0f;
    if (metal::isinf(u)) return u;
    return um1 * x / metal::precise::log(u);   // cancels the rounding error of u
}
inline float lt_log1p_f32(float x) {
    float u = 1.0f + x;
    if (u == 1.0f) return x;
    if (metal::isinf(u) || u <= 0.0f) return metal::precise::log(u);
    return metal::precise::log(u) * x / (u - 1.0f);
}
inline float lt_erf_f32(float x) {
    float a = metal::abs(x);
    if (a < 0.5f) {   // Taylor series: relative error < 1e-8
        float z = x * x;
        return x * 1.1283791670955126f * (1.0f + z * (-1.0f / 3 + z * (1.0f / 10 + z * (-1.0f / 42
               + z * (1.0f / 216 + z * (-1.0f / 1320 + z * (1.0f / 9360)))))));
    }
    // erfc by a Chebyshev fit (Numerical Recipes erfcc): relative error < 1.2e-7
    float t = 1.0f / (1.0f + 0.5f * a);
    float r = t * metal::precise::exp(-a * a - 1.26551223f + t * (1.00002368f + t * (0.37409196f
              + t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f
              + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));
    return metal::copysign(1.0f - r, x);
}
inline float lt_sigmoid_f32(float x) { return 1.0f / (1.0f + metal::precise::exp(-x)); }
inline float lt_reciprocal_f32(float x) { return 1.0f / x; }
inline float lt_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }
inline float lt_min_f32(float a, float b) { return (a < b || a != a) ? a : b; }
inline float lt_rem_f32(float a, float b) {
    float m = metal::fmod(a, b);
    return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
inline float lt_floordiv_f32(float a, float b) {
    if (b == 0) return a / b;
    float m = metal::fmod(a, b);
    float d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return metal::copysign(0.0f, a / b);
    float f = metal::floor(d);
    return d - f > 0.5f ? f + 1 : f;
}
// uint8_t: division by zero sets *err (the backend raises ZeroDivisionError); MIN / -1 wraps as in torch
inline uint8_t lt_idiv_u8(uint8_t a, uint8_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (uint8_t)-1) ? (uint8_t)(0 - (uint8_t)a) : (uint8_t)(a / b);
}
inline uint8_t lt_irem_u8(uint8_t a, uint8_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    uint8_t r = (b < 0 && b == (uint8_t)-1) ? 0 : (uint8_t)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (uint8_t)(r + b) : r;
}
inline uint8_t lt_ifloordiv_u8(uint8_t a, uint8_t b, device int32_t* err) {
    uint8_t q = lt_idiv_u8(a, b, err);
    return (b != 0 && b != (uint8_t)-1 && a % b != 0 && ((a < 0) != (b < 0))) ? (uint8_t)(q - 1) : q;
}
inline uint8_t lt_ifmod_u8(uint8_t a, uint8_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (uint8_t)-1) ? 0 : (uint8_t)(a % b);
}
inline uint8_t lt_ipow_u8(uint8_t a, uint8_t b) {
    uint8_t r = 1, x = (uint8_t)a;
    if (b < 0) return a == 1 ? 1 : (a == (uint8_t)-1 ? ((b & 1) ? (uint8_t)-1 : 1) : 0);
    for (uint8_t e = (uint8_t)b; e; e >>= 1) { if (e & 1) r *= x; x *= x; }
    return (uint8_t)r;
}
// int8_t: division by zero sets *err (the backend raises ZeroDivisionError); MIN / -1 wraps as in torch
inline int8_t lt_idiv_i8(int8_t a, int8_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int8_t)-1) ? (int8_t)(0 - (uint8_t)a) : (int8_t)(a / b);
}
inline int8_t lt_irem_i8(int8_t a, int8_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    int8_t r = (b < 0 && b == (int8_t)-1) ? 0 : (int8_t)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (int8_t)(r + b) : r;
}
inline int8_t lt_ifloordiv_i8(int8_t a, int8_t b, device int32_t* err) {
    int8_t q = lt_idiv_i8(a, b, err);
    return (b != 0 && b != (int8_t)-1 && a % b != 0 && ((a < 0) != (b < 0))) ? (int8_t)(q - 1) : q;
}
inline int8_t lt_ifmod_i8(int8_t a, int8_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int8_t)-1) ? 0 : (int8_t)(a % b);
}
inline int8_t lt_ipow_i8(int8_t a, int8_t b) {
    uint8_t r = 1, x = (uint8_t)a;
    if (b < 0) return a == 1 ? 1 : (a == (int8_t)-1 ? ((b & 1) ? (int8_t)-1 : 1) : 0);
    for (uint8_t e = (uint8_t)b; e; e >>= 1) { if (e & 1) r *= x; x *= x; }
    return (int8_t)r;
}
// int16_t: division by zero sets *err (the backend raises ZeroDivisionError); MIN / -1 wraps as in torch
inline int16_t lt_idiv_i16(int16_t a, int16_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int16_t)-1) ? (int16_t)(0 - (uint16_t)a) : (int16_t)(a / b);
}
inline int16_t lt_irem_i16(int16_t a, int16_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    int16_t r = (b < 0 && b == (int16_t)-1) ? 0 : (int16_t)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (int16_t)(r + b) : r;
}
inline int16_t lt_ifloordiv_i16(int16_t a, int16_t b, device int32_t* err) {
    int16_t q = lt_idiv_i16(a, b, err);
    return (b != 0 && b != (int16_t)-1 && a % b != 0 && ((a < 0) != (b < 0))) ? (int16_t)(q - 1) : q;
}
inline int16_t lt_ifmod_i16(int16_t a, int16_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int16_t)-1) ? 0 : (int16_t)(a % b);
}
inline int16_t lt_ipow_i16(int16_t a, int16_t b) {
    uint16_t r = 1, x = (uint16_t)a;
    if (b < 0) return a == 1 ? 1 : (a == (int16_t)-1 ? ((b & 1) ? (int16_t)-1 : 1) : 0);
    for (uint16_t e = (uint16_t)b; e; e >>= 1) { if (e & 1) r *= x; x *= x; }
    return (int16_t)r;
}
// int32_t: division by zero sets *err (the backend raises ZeroDivisionError); MIN / -1 wraps as in torch
inline int32_t lt_idiv_i32(int32_t a, int32_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int32_t)-1) ? (int32_t)(0 - (uint32_t)a) : (int32_t)(a / b);
}
inline int32_t lt_irem_i32(int32_t a, int32_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    int32_t r = (b < 0 && b == (int32_t)-1) ? 0 : (int32_t)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (int32_t)(r + b) : r;
}
inline int32_t lt_ifloordiv_i32(int32_t a, int32_t b, device int32_t* err) {
    int32_t q = lt_idiv_i32(a, b, err);
    return (b != 0 && b != (int32_t)-1 && a % b != 0 && ((a < 0) != (b < 0))) ? (int32_t)(q - 1) : q;
}
inline int32_t lt_ifmod_i32(int32_t a, int32_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int32_t)-1) ? 0 : (int32_t)(a % b);
}
inline int32_t lt_ipow_i32(int32_t a, int32_t b) {
    uint32_t r = 1, x = (uint32_t)a;
    if (b < 0) return a == 1 ? 1 : (a == (int32_t)-1 ? ((b & 1) ? (int32_t)-1 : 1) : 0);
    for (uint32_t e = (uint32_t)b; e; e >>= 1) { if (e & 1) r *= x; x *= x; }
    return (int32_t)r;
}
// int64_t: division by zero sets *err (the backend raises ZeroDivisionError); MIN / -1 wraps as in torch
inline int64_t lt_idiv_i64(int64_t a, int64_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int64_t)-1) ? (int64_t)(0 - (uint64_t)a) : (int64_t)(a / b);
}
inline int64_t lt_irem_i64(int64_t a, int64_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    int64_t r = (b < 0 && b == (int64_t)-1) ? 0 : (int64_t)(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? (int64_t)(r + b) : r;
}
inline int64_t lt_ifloordiv_i64(int64_t a, int64_t b, device int32_t* err) {
    int64_t q = lt_idiv_i64(a, b, err);
    return (b != 0 && b != (int64_t)-1 && a % b != 0 && ((a < 0) != (b < 0))) ? (int64_t)(q - 1) : q;
}
inline int64_t lt_ifmod_i64(int64_t a, int64_t b, device int32_t* err) {
    if (b == 0) { *err = 1; return 0; }
    return (b < 0 && b == (int64_t)-1) ? 0 : (int64_t)(a % b);
}
inline int64_t lt_ipow_i64(int64_t a, int64_t b) {
    uint64_t r = 1, x = (uint64_t)a;
    if (b < 0) return a == 1 ? 1 : (a == (int64_t)-1 ? ((b & 1) ? (int64_t)-1 : 1) : 0);
    for (uint64_t e = (uint64_t)b; e; e >>= 1) { if (e & 1) r *= x; x *= x; }
    return (int64_t)r;
}
// simd_shuffle_down for every register type: 64-bit values move as two 32-bit halves.
template <typename T> inline T lt_shuffle_down(T v, ushort d) { return metal::simd_shuffle_down(v, d); }
inline bool lt_shuffle_down(bool v, ushort d) { return metal::simd_shuffle_down(uint(v), d) != 0; }
inline int64_t lt_shuffle_down(int64_t v, ushort d) {
    uint2 h = as_type<uint2>(v);
    return as_type<int64_t>(uint2(metal::simd_shuffle_down(h.x, d), metal::simd_shuffle_down(h.y, d)));
}
[[kernel]] void custom_kernel_lt_699748767852_floatc_float_floatc_float(
  const constant float* a0 [[buffer(0)]],
  const device float* a1 [[buffer(1)]],
  const constant float* a2 [[buffer(2)]],
  device float* a3 [[buffer(3)]],
  uint3 thread_position_in_grid [[thread_position_in_grid]]) {
// linear: k0_pointwise, pointwise over 240 contiguous elements, one thread each
const int32_t i = int32_t(thread_position_in_grid.x);
if (i >= 240) return;
const float v2 = a0[0];
const float v3 = float(v2);
const float v6 = a2[0];
const float v7 = float(v6);
const float v1 = a1[i];
const float v4 = (v1 * v3);
const float v5 = metal::precise::exp(v4);
const float v8 = (v5 + v7);
const float v9 = lt_sigmoid_f32(v8);
a3[i] = v9;

}
