/*
 * npu-txn.c — TXN instruction streams (npu.md §1.5): reading an instruction file, validating
 * a stream against a kernel and its buffers, and generating the synthetic streams the
 * simulator runs when no mlir-aie build is at hand.
 *
 * Stream layout: a 4-word header (w0 = rows << 24 | devGen << 16 | minor << 8 | major,
 * w1 = memtile rows << 8 | columns, w2 = operation count, w3 = total bytes incl. header),
 * then operations whose opcode is the low byte of their first word. Sizes: WRITE 6 words,
 * BLOCKWRITE byte length at word 3, MASKWRITE 7 words, PREEMPT 1, LOADPDI 4, custom ops
 * (opcode >= 0x80: TCT sync, DDR_PATCH, ...) byte length at word 1. A DDR_PATCH names a host
 * buffer at word 8 (0 = kernel arg 3) and a byte offset into it at word 10.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "npu-impl.h"

#define HX_NPU_TXN_MAX_BYTES (64u << 20)

static uint32_t hx_npu_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int hx__npu_txn_generate(const struct hx_npu_kernel_desc *d, uint32_t *words, size_t cap,
                         size_t *n_words)
{
    uint32_t buf[128];
    size_t w = 4;
    const uint32_t n_args = 3;
    for (uint32_t a = 0; a < n_args; a++) {
        /* BLOCKWRITE: program one shim BD (8 registers) */
        uint32_t bd = 0x1D000u + 0x20u * a;
        buf[w++] = HX_NPU_TXN_BLOCKWRITE;
        buf[w++] = 0;
        buf[w++] = bd;
        buf[w++] = 4 * (4 + 8);
        for (uint32_t r = 0; r < 8; r++) buf[w++] = (r == 0) ? (uint32_t)(a == 1 ? d->K * d->N : d->M * d->K) : r;
        /* DDR_PATCH: point the BD's address at host buffer a, offset 0 */
        uint32_t *p = &buf[w];
        memset(p, 0, 12 * sizeof *p);
        p[0] = HX_NPU_TXN_DDR_PATCH;
        p[1] = 12 * 4;
        p[6] = bd + 4;
        p[8] = a;
        p[10] = 0;
        w += 12;
        /* WRITE: push the BD onto the channel's task queue */
        buf[w++] = HX_NPU_TXN_WRITE;
        buf[w++] = 0;
        buf[w++] = 0x1D204u + 8u * a;
        buf[w++] = 0;
        buf[w++] = a;
        buf[w++] = 6 * 4;
    }
    /* TCT sync: wait for the C transfer to finish */
    buf[w++] = HX_NPU_TXN_TCT;
    buf[w++] = 4 * 4;
    buf[w++] = 0x00010000u;
    buf[w++] = 0x01000101u;
    buf[0] = 6u << 24 | (uint32_t)d->dev_gen << 16 | 1u << 8 | 0u;
    buf[1] = 1u << 8 | (uint32_t)(d->dev_gen == 3 ? 4 : 8);
    buf[2] = 3 * n_args + 1;
    buf[3] = (uint32_t)(w * 4);
    *n_words = w;
    if (words) memcpy(words, buf, HX_MIN(cap, w) * sizeof *buf);
    return HX_OK;
}

/* Length in bytes of the op at p (avail bytes left), or 0 with err set. */
static size_t hx_npu_txn_op_len(const uint8_t *p, size_t avail, size_t at, char *err, size_t n)
{
    if (avail < 4) return snprintf(err, n, "truncated operation at byte %zu", at), 0;
    uint32_t w0 = hx_npu_le32(p), op = w0 & 0xFF;
    size_t len = 0;
    switch (op) {
    case HX_NPU_TXN_WRITE: len = 24; break;
    case HX_NPU_TXN_MASKWRITE: len = 28; break;
    case HX_NPU_TXN_PREEMPT: len = 4; break;
    case HX_NPU_TXN_LOADPDI: len = 16; break;
    case HX_NPU_TXN_BLOCKWRITE:
        if (avail < 16) return snprintf(err, n, "truncated BLOCKWRITE at byte %zu", at), 0;
        len = hx_npu_le32(p + 12);
        if (len < 16 || len % 4)
            return snprintf(err, n, "BLOCKWRITE at byte %zu has length %zu", at, len), 0;
        break;
    default:
        if (op < 0x80)
            return snprintf(err, n, "unknown opcode 0x%02x at byte %zu", (unsigned)op, at), 0;
        if (avail < 8) return snprintf(err, n, "truncated operation at byte %zu", at), 0;
        len = hx_npu_le32(p + 4);
        if (len < 8 || len % 4)
            return snprintf(err, n, "operation 0x%02x at byte %zu has length %zu", (unsigned)op,
                            at, len), 0;
        if (op == HX_NPU_TXN_DDR_PATCH && len != 48)
            return snprintf(err, n, "DDR_PATCH at byte %zu has length %zu, not 48", at, len), 0;
    }
    if (len > avail)
        return snprintf(err, n, "operation 0x%02x at byte %zu runs past the end (%zu > %zu)",
                        (unsigned)op, at, len, avail), 0;
    return len;
}

static int hx_npu_txn_patch(const uint8_t *p, size_t at, int n_bos, const size_t *bo_bytes,
                            char *err, size_t n)
{
    uint32_t idx = hx_npu_le32(p + 32), plus = hx_npu_le32(p + 40);
    if ((int64_t)idx >= n_bos)
        return snprintf(err, n, "DDR_PATCH at byte %zu names argument %u of %d host buffers", at,
                        idx, n_bos), HX_E_FORMAT;
    /* the compiler folds 0x80000000 into arg_plus for host arguments >= 5 (npu.md §1.5) */
    uint64_t off = idx >= 5 && plus >= 0x80000000u ? plus - 0x80000000u : plus;
    if (bo_bytes && off >= bo_bytes[idx])
        return snprintf(err, n, "DDR_PATCH at byte %zu: offset %llu outside buffer %u (%zu bytes)",
                        at, (unsigned long long)off, idx, bo_bytes[idx]), HX_E_FORMAT;
    return HX_OK;
}

int hx__npu_txn_validate(const void *stream, size_t nbytes, int dev_gen, int n_bos,
                         const size_t *bo_bytes, char *err, size_t err_len)
{
    const uint8_t *s = stream;
    if (nbytes < 16 || nbytes % 4)
        return snprintf(err, err_len, "instruction stream of %zu bytes (needs a 16-byte header "
                        "and whole words)", nbytes), HX_E_FORMAT;
    uint32_t w0 = hx_npu_le32(s), w2 = hx_npu_le32(s + 8), w3 = hx_npu_le32(s + 12);
    unsigned gen = (w0 >> 16) & 0xFF, rows = w0 >> 24, major = w0 & 0xFF, minor = (w0 >> 8) & 0xFF;
    if ((int)gen != dev_gen)
        return snprintf(err, err_len, "instruction header is for device generation %u, the "
                        "kernel is generation %d", gen, dev_gen), HX_E_FORMAT;
    if (rows != 6 || major != 0 || minor != 1)
        return snprintf(err, err_len, "instruction header version %u.%u with %u rows (expected "
                        "0.1, 6 rows)", major, minor, rows), HX_E_FORMAT;
    if (w3 != nbytes)
        return snprintf(err, err_len, "instruction header says %u bytes, the stream has %zu", w3,
                        nbytes), HX_E_FORMAT;
    size_t at = 16;
    uint32_t n_ops = 0;
    while (at < nbytes) {
        size_t len = hx_npu_txn_op_len(s + at, nbytes - at, at, err, err_len);
        if (!len) return HX_E_FORMAT;
        if ((s[at] == HX_NPU_TXN_DDR_PATCH) &&
            hx_npu_txn_patch(s + at, at, n_bos, bo_bytes, err, err_len))
            return HX_E_FORMAT;
        at += len;
        n_ops++;
    }
    if (n_ops != w2)
        return snprintf(err, err_len, "instruction header says %u operations, the stream has %u",
                        w2, n_ops), HX_E_FORMAT;
    return HX_OK;
}

static int hx_npu_txn_parse_text(const char *text, size_t len, uint32_t **words, size_t *n_words,
                                 char *err, size_t n)
{
    size_t cap = len / 9 + 2, nw = 0;
    uint32_t *w = hx_malloc(cap * sizeof *w);
    if (!w) return HX_E_NOMEM;
    for (size_t i = 0, line = 1; i < len;) {
        while (i < len && (text[i] == '\r' || text[i] == ' ' || text[i] == '\t')) i++;
        if (i < len && text[i] == '\n') { i++, line++; continue; }
        uint32_t v = 0;
        int digits = 0;
        for (; i < len && digits < 9; i++, digits++) {
            char c = text[i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) break;
            v = v << 4 | (uint32_t)d;
        }
        if (digits != 8 || nw >= cap) {
            hx_free(w);
            return snprintf(err, n, "line %zu: expected one 8-digit hex word", line), HX_E_FORMAT;
        }
        w[nw++] = v;
    }
    *words = w, *n_words = nw;
    return HX_OK;
}

int hx__npu_txn_read_file(const char *path, uint32_t **words, size_t *n_words, char *err,
                          size_t n)
{
    *words = NULL, *n_words = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, n, "cannot open instruction file %s: %s", path, strerror(errno)), HX_E_IO;
    uint8_t *buf = hx_malloc(HX_NPU_TXN_MAX_BYTES + 1);
    size_t got = buf ? fread(buf, 1, HX_NPU_TXN_MAX_BYTES + 1, f) : 0;
    bool bad = ferror(f);
    fclose(f);
    if (!buf) return HX_E_NOMEM;
    int st = HX_OK;
    size_t plen = strlen(path);
    if (bad || got > HX_NPU_TXN_MAX_BYTES) {
        st = bad ? HX_E_IO : HX_E_FORMAT;
        snprintf(err, n, "%s: %s", path, bad ? "read error" : "larger than 64 MiB");
    } else if (plen > 4 && !strcmp(path + plen - 4, ".txt")) {
        st = hx_npu_txn_parse_text((const char *)buf, got, words, n_words, err, n);
    } else if (got == 0 || got % 4) {
        st = HX_E_FORMAT;
        snprintf(err, n, "instruction file %s has %zu bytes, not a whole number of 32-bit words",
                 path, got);
    } else {
        uint32_t *w = hx_malloc(got);
        if (!w) st = HX_E_NOMEM;
        for (size_t i = 0; w && i < got / 4; i++) w[i] = hx_npu_le32(buf + 4 * i);
        *words = w, *n_words = got / 4;
    }
    hx_free(buf);
    return st;
}
