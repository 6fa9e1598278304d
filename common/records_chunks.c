/* records_chunks.c: a request's chunk list in its packed form, the request
 * record's "chunks_packed" (docs/records.md, "The packed chunk list").
 *
 * The list form, [[t_ns,tokens,"t"],...], spends ~19 bytes on a token event
 * whose information is a few bits: a time close to the one before it (often
 * equal: one socket read carries many events) and a token count and kind that
 * rarely change. The packed form writes, per chunk, the LEB128 varint of
 * 2*zigzag(dt) + x, where dt is the time since the previous chunk's (the
 * first chunk's: since 0) taken mod 2^64, and x = 1 when a second varint
 * follows with 2*tokens + (kind == 't'); x = 0 repeats the previous chunk's
 * tokens and kind (before the first chunk: 1 token, answer). Those bytes go
 * into the line as standard base64 (RFC 4648, padded), so the line stays
 * JSON. Times stay exact integer nanoseconds. Measured: 1.9 bytes per token
 * event on a zero-compute server where most events share a read's stamp,
 * 6.0 where every gap is milliseconds (docs/benchmarks.md, "Records").
 *
 * Cost: the writer thread encodes (no printf per number, as before); the
 * reader decodes one string instead of parsing three JSON values and an
 * array per chunk. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

/* Times beyond +/- 2^62 ns are not times a run can hold (records_read.c). */
#define TIME_LIMIT_NS (INT64_C(1) << 62)
/* Raw bytes gathered before they are turned into base64 text: a multiple of 3,
 * so that only the last group of a list is padded. */
#define RAW_BLOCK 768
/* The most bytes one chunk takes: a 10-byte head and a 5-byte count. */
#define CHUNK_MAX_BYTES 15

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ---- encoding (writer thread) ------------------------------------------------ */

typedef struct pack_out {
    ll_buf *b;
    uint8_t raw[RAW_BLOCK + CHUNK_MAX_BYTES];
    size_t n;
} pack_out;

/* Turn the whole groups of three bytes gathered so far (all of them, padded,
 * when last) into base64 appended to the line. */
static int pack_flush(pack_out *o, int last)
{
    char txt[(RAW_BLOCK + CHUNK_MAX_BYTES) / 3 * 4 + 8];
    size_t whole = o->n / 3 * 3, k = 0, i;
    for (i = 0; i < whole; i += 3) {
        uint32_t v = (uint32_t)o->raw[i] << 16 | (uint32_t)o->raw[i + 1] << 8 | o->raw[i + 2];
        txt[k++] = b64_alphabet[v >> 18];
        txt[k++] = b64_alphabet[(v >> 12) & 63];
        txt[k++] = b64_alphabet[(v >> 6) & 63];
        txt[k++] = b64_alphabet[v & 63];
    }
    size_t rest = o->n - whole;
    if (last && rest) {
        uint32_t v = (uint32_t)o->raw[i] << 16 | (rest == 2 ? (uint32_t)o->raw[i + 1] << 8 : 0);
        txt[k++] = b64_alphabet[v >> 18];
        txt[k++] = b64_alphabet[(v >> 12) & 63];
        txt[k++] = rest == 2 ? b64_alphabet[(v >> 6) & 63] : '=';
        txt[k++] = '=';
        rest = 0;
    }
    memmove(o->raw, o->raw + o->n - rest, rest);
    o->n = rest;
    return ll_buf_append(o->b, txt, k);
}

/* LEB128 of v at p; returns the bytes written (at most 10). */
static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t k = 0;
    for (; v >= 0x80; v >>= 7)
        p[k++] = (uint8_t)(v | 0x80);
    p[k++] = (uint8_t)v;
    return k;
}

/* LEB128 of the 65-bit 2*zz + x without overflowing: the first byte holds x
 * and zz's low 6 bits, the rest zz >> 6. At most 10 bytes. */
static size_t put_head(uint8_t *p, uint64_t zz, int x)
{
    uint8_t first = (uint8_t)(((zz & 0x3f) << 1) | (uint64_t)x);
    zz >>= 6;
    if (!zz) {
        p[0] = first;
        return 1;
    }
    p[0] = first | 0x80;
    return 1 + put_varint(p + 1, zz);
}

int ll_rec_chunks_pack(ll_buf *b, const ll_rec_chunk *c, size_t n)
{
    pack_out o = {.b = b};
    uint64_t prev_t = 0;
    int32_t prev_tok = 1;
    char prev_kind = LL_CHUNK_ANSWER;
    int rc;
    for (size_t i = 0; i < n; i++) {
        /* dt mod 2^64, so two times anywhere in int64 always have a delta */
        uint64_t dt = (uint64_t)c[i].t_ns - prev_t;
        uint64_t zz = (dt << 1) ^ (0 - (dt >> 63));
        char kind = c[i].kind == LL_CHUNK_THINK ? LL_CHUNK_THINK : LL_CHUNK_ANSWER;
        int x = c[i].tokens != prev_tok || kind != prev_kind;
        o.n += put_head(o.raw + o.n, zz, x);
        /* a negative count (never written) reads back above 2^31 - 1: out of range */
        if (x)
            o.n += put_varint(o.raw + o.n, 2 * (uint64_t)(uint32_t)c[i].tokens + (kind == LL_CHUNK_THINK));
        prev_t = (uint64_t)c[i].t_ns;
        prev_tok = c[i].tokens;
        prev_kind = kind;
        if (o.n >= RAW_BLOCK && (rc = pack_flush(&o, 0)) != 0)
            return rc;
    }
    return pack_flush(&o, 1);
}

/* ---- decoding (readers) -------------------------------------------------------- */

/* A base64 character's value plus one; 0: not base64. */
static const uint8_t b64_value1[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8, ['I'] = 9,
    ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16, ['Q'] = 17,
    ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25,
    ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33,
    ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41,
    ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
    ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56, ['4'] = 57,
    ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
};

/* The base64 text s[0..len) into raw bytes (raw: room for len * 3 / 4),
 * their count into *n. Padding ('=') may only end the text; bits short of a
 * byte at the end are dropped. LL_EPARSE when the text is not base64. Four
 * characters at a time: the reader's cost per token event is mostly here. */
static int b64_decode(const char *s, size_t len, uint8_t *raw, size_t *n)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t end = len, i = 0, k = 0;
    while (end > 0 && s[end - 1] == '=')
        end--;
    for (; i + 4 <= end; i += 4) {
        uint32_t a = b64_value1[u[i]], b = b64_value1[u[i + 1]], c = b64_value1[u[i + 2]], d = b64_value1[u[i + 3]];
        if (!a || !b || !c || !d)
            return LL_EPARSE;
        uint32_t w = (a - 1) << 18 | (b - 1) << 12 | (c - 1) << 6 | (d - 1);
        raw[k++] = (uint8_t)(w >> 16);
        raw[k++] = (uint8_t)(w >> 8);
        raw[k++] = (uint8_t)w;
    }
    uint32_t acc = 0;
    int nbits = 0;
    for (; i < end; i++) {
        uint32_t v = b64_value1[u[i]];
        if (!v)
            return LL_EPARSE;
        acc = acc << 6 | (v - 1);
        if ((nbits += 6) >= 8) {
            nbits -= 8;
            raw[k++] = (uint8_t)(acc >> nbits);
        }
    }
    *n = k;
    return 0;
}

/* The raw bytes p[0..end) being read. */
typedef struct unpack_in {
    const uint8_t *p;
    size_t end, pos;
} unpack_in;

/* The next byte, or -1 at the end. */
static inline int next_byte(unpack_in *in)
{
    return in->pos < in->end ? in->p[in->pos++] : -1;
}

/* A chunk's head: *x and zz. LL_EPARSE when cut short or longer than 65 bits. */
static int get_head(unpack_in *in, int first, uint64_t *zz, int *x)
{
    *x = first & 1;
    *zz = (uint64_t)(first >> 1) & 0x3f;
    for (int shift = 6, b = first; b & 0x80; shift += 7) {
        if (shift > 62 || (b = next_byte(in)) < 0)
            return LL_EPARSE;
        if (shift == 62 && (b & 0x7c)) /* only zz's top two bits are left */
            return LL_EPARSE;
        *zz |= (uint64_t)(b & 0x7f) << shift;
    }
    return 0;
}

/* A plain varint of at most 64 bits. */
static int get_varint(unpack_in *in, uint64_t *v)
{
    *v = 0;
    for (int shift = 0;; shift += 7) {
        int b = next_byte(in);
        if (b < 0 || shift > 63 || (shift == 63 && (b & 0x7e)))
            return LL_EPARSE;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
}

/* u as a two's complement int64, without the implementation-defined cast. */
static int64_t as_i64(uint64_t u)
{
    return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(UINT64_MAX - u) - 1;
}

/* The chunks of raw bytes in into v (room reserved for one a byte). */
static int unpack_raw(unpack_in *in, ll_rec_chunk *v, size_t *n)
{
    uint64_t t = 0;
    int32_t tok = 1;
    char kind = LL_CHUNK_ANSWER;
    int b, x, rc;
    while ((b = next_byte(in)) >= 0) {
        uint64_t zz, tk;
        if ((rc = get_head(in, b, &zz, &x)) != 0)
            return rc;
        t += (zz >> 1) ^ (0 - (zz & 1)); /* mod 2^64, as written */
        if (x) {
            if ((rc = get_varint(in, &tk)) != 0)
                return rc;
            if ((tk >> 1) > INT32_MAX)
                return LL_ERANGE;
            tok = (int32_t)(tk >> 1);
            kind = tk & 1 ? LL_CHUNK_THINK : LL_CHUNK_ANSWER;
        }
        if (as_i64(t) < -TIME_LIMIT_NS || as_i64(t) > TIME_LIMIT_NS)
            return LL_ERANGE;
        v[(*n)++] = (ll_rec_chunk){as_i64(t), tok, kind};
    }
    return 0;
}

int ll_rec_chunks_unpack(const char *s, size_t len, ll_rec_chunk **v, size_t *n, size_t *cap)
{
    size_t room = len / 4 * 3 + 3;
    *n = 0;
    /* every chunk takes at least one byte: room for all of them at once */
    if (ll_vec_reserve_((void **)v, cap, room, sizeof **v))
        return LL_ENOMEM;
    uint8_t stack[4096], *raw = room <= sizeof stack ? stack : malloc(room);
    if (!raw)
        return LL_ENOMEM;
    unpack_in in = {.p = raw};
    int rc = b64_decode(s, len, raw, &in.end);
    if (rc == 0)
        rc = unpack_raw(&in, *v, n);
    if (raw != stack)
        free(raw);
    return rc;
}
