/* test_numfmt.c: engine/numfmt.h's bf16 and e4m3 conversions against known
 * bit patterns: signed zeros, infinities, NaNs, fp32 subnormals, rounding
 * ties (to even) on both sides, e4m3's subnormals, its saturation at 448 and
 * every one of its 256 codes decoded and encoded back. The cpu backend, the
 * CUDA kernels' host helpers and the CUDA device code all use these. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "numfmt.h"
#include "testutil.h"

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t u_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void check_bf16(void)
{
    static const struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } c[] = {
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x3f800000u, 0x3f80, "1"},
        {0xbf800000u, 0xbf80, "-1"},
        {0x7f800000u, 0x7f80, "+inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0xffc00000u, 0xffc0, "negative quiet NaN"},
        {0x7f800001u, 0x7fc0, "signalling NaN, low payload: quiet, not inf"},
        {0x7fa00000u, 0x7fe0, "signalling NaN, high payload kept, quiet bit set"},
        {0x3f808000u, 0x3f80, "tie, even below: down"},
        {0x3f818000u, 0x3f82, "tie, odd below: up"},
        {0x3f808001u, 0x3f81, "just above a tie: up"},
        {0x3f807fffu, 0x3f80, "just below a tie: down"},
        {0xbf818000u, 0xbf82, "negative tie, odd: away from zero"},
        {0x7f7fffffu, 0x7f80, "largest fp32 rounds to inf"},
        {0x7f7f7fffu, 0x7f7f, "below the halfway point stays finite"},
        {0x00000001u, 0x0000, "smallest fp32 subnormal rounds to 0"},
        {0x00008000u, 0x0000, "subnormal tie, even: down to 0"},
        {0x00018000u, 0x0002, "subnormal tie, odd: up"},
        {0x007fffffu, 0x0080, "largest subnormal rounds up to the smallest normal"},
        {0x80010000u, 0x8001, "negative subnormal, exact"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint16_t got = f32_to_bf16(f_of(c[i].in));
        CHECK(got == c[i].out, "f32_to_bf16(0x%08x) = 0x%04x, want 0x%04x (%s)", c[i].in, got,
              c[i].out, c[i].what);
    }
    /* bf16 -> fp32 is the top half, exactly, for every pattern (NaNs too) */
    int exact = 1;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = bf16_to_f32((uint16_t)h);
        if (u_of(f) != h << 16 || (!isnan(f) && f32_to_bf16(f) != h))
            exact = 0;
    }
    CHECK(exact, "bf16 -> fp32 -> bf16 is the identity on all 65536 patterns (NaNs: the bits)");
}

static void check_e4m3(void)
{
    static const struct {
        float in;
        uint8_t out;
        const char *what;
    } c[] = {
        {0.0f, 0x00, "+0"},
        {-0.0f, 0x80, "-0"},
        {1.0f, 0x38, "1"},
        {-2.0f, 0xc0, "-2"},
        {448.0f, 0x7e, "largest finite"},
        {-448.0f, 0xfe, "largest finite, negative"},
        {449.0f, 0x7e, "above 448 saturates"},
        {480.0f, 0x7e, "the NaN code's magnitude saturates"},
        {1e30f, 0x7e, "huge saturates"},
        {INFINITY, 0x7e, "+inf saturates (satfinite)"},
        {-INFINITY, 0xfe, "-inf saturates"},
        {NAN, 0x7f, "NaN"},
        {-NAN, 0xff, "negative NaN"},
        {0x1p-6f, 0x08, "smallest normal"},
        {0x1p-9f, 0x01, "smallest subnormal"},
        {7 * 0x1p-9f, 0x07, "largest subnormal"},
        {0x1p-10f, 0x00, "half the smallest subnormal: tie to even 0"},
        {3 * 0x1p-10f, 0x02, "1.5 units: tie to even 2"},
        {5 * 0x1p-10f, 0x02, "2.5 units: tie to even 2"},
        {0x1p-10f * 1.0001f, 0x01, "just above half a unit: 1"},
        {0x1p-12f, 0x00, "a quarter unit: 0"},
        {1e-45f, 0x00, "fp32 subnormal: 0"},
        {15 * 0x1p-10f, 0x08, "7.5 units: tie to even, the smallest normal"},
        {1.0625f, 0x38, "1 + half a step: tie to even 1"},
        {1.1875f, 0x3a, "1.125 + half a step: tie to even 1.25"},
        {1.0626f, 0x39, "just above a tie: up"},
        {-1.0625f, 0xb8, "negative tie: to even"},
        {15.5f, 0x58, "tie carrying into the exponent: 16"},
        {432.0f, 0x7e, "tie between 416 and 448: to even 448"},
        {440.0f, 0x7e, "between 416 and 448, nearer 448"},
        {420.0f, 0x7d, "nearer 416"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint8_t got = f32_to_e4m3(c[i].in);
        CHECK(got == c[i].out, "f32_to_e4m3(%.9g) = 0x%02x, want 0x%02x (%s)", (double)c[i].in, got,
              c[i].out, c[i].what);
    }
    static const struct {
        uint8_t in;
        uint32_t out;
    } d[] = {
        {0x00, 0x00000000u}, {0x80, 0x80000000u}, {0x01, 0x3b000000u}, /* 2^-9 */
        {0x07, 0x3c600000u}, /* 7 * 2^-9 */ {0x08, 0x3c800000u}, /* 2^-6 */
        {0x38, 0x3f800000u}, {0x39, 0x3f900000u}, {0x7e, 0x43e00000u}, /* 448 */
        {0xfe, 0xc3e00000u},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        uint32_t got = u_of(e4m3_to_f32(d[i].in));
        CHECK(got == d[i].out, "e4m3_to_f32(0x%02x) = 0x%08x, want 0x%08x", d[i].in, got, d[i].out);
    }
    CHECK(isnan(e4m3_to_f32(0x7f)) && isnan(e4m3_to_f32(0xff)) && signbit(e4m3_to_f32(0xff)),
          "0x7f and 0xff are NaN");
    /* every finite code: decoded exactly, encoded back to itself, monotone */
    int round_trip = 1, monotone = 1;
    for (int code = 0; code < 256; code++) {
        if ((code & 0x7f) == 0x7f)
            continue;
        float v = e4m3_to_f32((uint8_t)code);
        if (f32_to_e4m3(v) != code)
            round_trip = 0;
        if ((code & 0x7f) > 0 && (code & 0x7f) < 0x7e) {
            float next = e4m3_to_f32((uint8_t)(code + 1));
            if (!(fabsf(next) > fabsf(v)))
                monotone = 0;
        }
    }
    CHECK(round_trip, "every finite e4m3 code encodes back to itself");
    CHECK(monotone, "codes increase in magnitude");
}

int main(void)
{
    check_bf16();
    check_e4m3();
    TEST_MAIN_END();
}
