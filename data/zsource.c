/* An input file's bytes, decompressed when its magic says gzip or zstd
 * (fsgd/zsource.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "fsgd/error.h"
#include "fsgd/input.h"
#include "fsgd/zsource.h"

#define IN_CAP ((size_t)256 << 10)

struct fsgd_zsource {
    int fd, own_fd, stream;
    char *path;
    fsgd_zsource_codec_t codec;
    unsigned char *in; /* compressed bytes read, not yet given to the decoder (plain: not yet returned) */
    size_t in_pos, in_len;
    uint64_t in_offset; /* bytes of the file before in[0] */
    int in_eof;
    z_stream zs;
    int zs_live;   /* zs initialised */
    int in_member; /* a gzip member or zstd frame begun and not ended */
    ZSTD_DStream *zd;
    int failed;
    char errmsg[512];
};

static int fail(fsgd_zsource_t *z, int code, char *err, size_t errsz)
{
    z->failed = code;
    return fsgd_err_fmt(err, errsz, code, "%s", z->errmsg);
}

/* Reads more of the file into in (what is left of it moved to the front).
 * 0, or a negative error in z->errmsg. */
static int fill(fsgd_zsource_t *z)
{
    if (z->in_pos) {
        memmove(z->in, z->in + z->in_pos, z->in_len - z->in_pos);
        z->in_offset += z->in_pos;
        z->in_len -= z->in_pos;
        z->in_pos = 0;
    }
    while (z->in_len < IN_CAP) {
        ssize_t n = read(z->fd, z->in + z->in_len, IN_CAP - z->in_len);
        if (n > 0) {
            z->in_len += (size_t)n;
            return 0;
        }
        if (n == 0) {
            z->in_eof = 1;
            return 0;
        }
        if (errno != EINTR) {
            snprintf(z->errmsg, sizeof z->errmsg, "%s: read error at byte %llu: %s", z->path,
                     (unsigned long long)(z->in_offset + z->in_len), strerror(errno));
            return FSGD_E_IO;
        }
    }
    return 0;
}

fsgd_zsource_t *fsgd_zsource_open(const char *path, char *err, size_t errsz)
{
    fsgd_zsource_t *z = calloc(1, sizeof *z);
    if (z) {
        z->path = strdup(path);
        z->in = malloc(IN_CAP);
    }
    if (!z || !z->path || !z->in) {
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory opening '%s'", path);
        fsgd_zsource_close(z);
        return NULL;
    }
    if (!strcmp(path, "-")) {
        z->fd = 0;
    } else {
        z->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (z->fd < 0) {
            fsgd_err_fmt(err, errsz, FSGD_E_IO, "cannot open '%s': %s", path, strerror(errno));
            fsgd_zsource_close(z);
            return NULL;
        }
        z->own_fd = 1;
#ifdef POSIX_FADV_SEQUENTIAL
        (void)posix_fadvise(z->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    }
    z->stream = fsgd_input_is_stream(z->fd);
    /* the magic: a pipe may hand over fewer bytes than asked, so read on
     * until 4 are here or the input ends */
    while (z->in_len < 4 && !z->in_eof) {
        int rc = fill(z);
        if (rc < 0) {
            fsgd_err_fmt(err, errsz, rc, "%s", z->errmsg);
            fsgd_zsource_close(z);
            return NULL;
        }
    }
    const unsigned char *m = z->in;
    if (z->in_len >= 2 && m[0] == 0x1f && m[1] == 0x8b) {
        z->codec = FSGD_ZSOURCE_GZIP;
        /* 16 + MAX_WBITS: gzip framing only (a zlib or raw stream is not what the magic said) */
        if (inflateInit2(&z->zs, 16 + MAX_WBITS) != Z_OK) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: cannot start a gzip decoder", path);
            fsgd_zsource_close(z);
            return NULL;
        }
        z->zs_live = 1;
    } else if (z->in_len >= 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) {
        z->codec = FSGD_ZSOURCE_ZSTD;
        if (!(z->zd = ZSTD_createDStream()) || ZSTD_isError(ZSTD_initDStream(z->zd))) {
            fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "%s: cannot start a zstd decoder", path);
            fsgd_zsource_close(z);
            return NULL;
        }
    }
    return z;
}

static ssize_t read_plain(fsgd_zsource_t *z, unsigned char *buf, size_t cap)
{
    if (z->in_pos < z->in_len) { /* the bytes read to tell the codec come first */
        size_t n = z->in_len - z->in_pos < cap ? z->in_len - z->in_pos : cap;
        memcpy(buf, z->in + z->in_pos, n);
        z->in_pos += n;
        return (ssize_t)n;
    }
    if (z->in_eof)
        return 0;
    for (;;) {
        ssize_t n = read(z->fd, buf, cap);
        if (n >= 0) {
            z->in_eof = n == 0;
            return n;
        }
        if (errno != EINTR) {
            snprintf(z->errmsg, sizeof z->errmsg, "%s: read error: %s", z->path, strerror(errno));
            return FSGD_E_IO;
        }
    }
}

static int truncated(fsgd_zsource_t *z)
{
    snprintf(z->errmsg, sizeof z->errmsg,
             "%s: truncated %s stream: the file ends at byte %llu inside a %s (a partial download or copy?)",
             z->path, fsgd_zsource_codec_name(z->codec), (unsigned long long)(z->in_offset + z->in_len),
             z->codec == FSGD_ZSOURCE_GZIP ? "gzip member" : "zstd frame");
    return FSGD_E_TRUNCATED;
}

static ssize_t read_gzip(fsgd_zsource_t *z, unsigned char *buf, size_t cap)
{
    const uInt want = cap > UINT32_MAX ? UINT32_MAX : (uInt)cap;
    z->zs.next_out = buf;
    z->zs.avail_out = want;
    while (z->zs.avail_out == want) { /* until some bytes come out */
        if (z->in_len - z->in_pos < (z->in_member ? 1u : 2u) && !z->in_eof) {
            int rc = fill(z); /* (a next member's magic may be split over two reads) */
            if (rc < 0)
                return rc;
            continue;
        }
        if (!z->in_member) {
            if (z->in_pos == z->in_len)
                return 0; /* the end, between members */
            /* after a member: another member, or the end; anything else is not gzip */
            const unsigned char *m = z->in + z->in_pos;
            if (z->in_len - z->in_pos < 2 || m[0] != 0x1f || m[1] != 0x8b) {
                snprintf(z->errmsg, sizeof z->errmsg,
                         "%s: corrupt gzip stream at byte %llu: bytes that are not a gzip member after the last one",
                         z->path, (unsigned long long)(z->in_offset + z->in_pos));
                return FSGD_E_FORMAT;
            }
            inflateReset(&z->zs);
            z->in_member = 1;
        }
        /* with the input all read, zlib may still hold output: it is asked
         * until it makes no progress, and only then is the member cut short */
        z->zs.next_in = z->in + z->in_pos;
        z->zs.avail_in = (uInt)(z->in_len - z->in_pos);
        const size_t in_before = z->in_pos;
        int zr = inflate(&z->zs, Z_NO_FLUSH);
        z->in_pos = z->in_len - z->zs.avail_in;
        if (zr == Z_STREAM_END) {
            z->in_member = 0;
        } else if (zr == Z_DATA_ERROR || zr == Z_NEED_DICT || zr == Z_STREAM_ERROR) {
            snprintf(z->errmsg, sizeof z->errmsg, "%s: corrupt gzip stream at byte %llu (%s)", z->path,
                     (unsigned long long)(z->in_offset + z->in_pos), z->zs.msg ? z->zs.msg : "bad data");
            return FSGD_E_FORMAT;
        } else if (zr == Z_MEM_ERROR) {
            snprintf(z->errmsg, sizeof z->errmsg, "%s: out of memory decompressing", z->path);
            return FSGD_E_NOMEM;
        } else if (z->in_eof && z->in_pos == z->in_len && z->in_pos == in_before && z->zs.avail_out == want) {
            return truncated(z);
        }
    }
    return (ssize_t)((unsigned char *)z->zs.next_out - buf);
}

static ssize_t read_zstd(fsgd_zsource_t *z, unsigned char *buf, size_t cap)
{
    ZSTD_outBuffer out = {buf, cap, 0};
    while (out.pos == 0) {
        if (z->in_pos == z->in_len && !z->in_eof) {
            int rc = fill(z);
            if (rc < 0)
                return rc;
            continue;
        }
        if (z->in_pos == z->in_len && !z->in_member)
            return 0; /* the end, between frames */
        /* as for gzip: buffered output is drained before a frame is called cut */
        ZSTD_inBuffer in = {z->in, z->in_len, z->in_pos};
        size_t r = ZSTD_decompressStream(z->zd, &out, &in);
        const int progress = in.pos != z->in_pos || out.pos != 0;
        z->in_pos = in.pos;
        if (ZSTD_isError(r)) {
            snprintf(z->errmsg, sizeof z->errmsg, "%s: corrupt zstd stream at byte %llu (%s)", z->path,
                     (unsigned long long)(z->in_offset + z->in_pos), ZSTD_getErrorName(r));
            return FSGD_E_FORMAT;
        }
        z->in_member = r != 0; /* 0: a frame ended here, all of it flushed */
        if (z->in_member && z->in_eof && z->in_pos == z->in_len && !progress)
            return truncated(z);
    }
    return (ssize_t)out.pos;
}

ssize_t fsgd_zsource_read(fsgd_zsource_t *z, void *buf, size_t cap, char *err, size_t errsz)
{
    if (z->failed)
        return fsgd_err_fmt(err, errsz, z->failed, "%s", z->errmsg);
    if (cap == 0)
        return 0;
    ssize_t n = z->codec == FSGD_ZSOURCE_GZIP   ? read_gzip(z, buf, cap)
                : z->codec == FSGD_ZSOURCE_ZSTD ? read_zstd(z, buf, cap)
                                                : read_plain(z, buf, cap);
    return n < 0 ? fail(z, (int)n, err, errsz) : n;
}

fsgd_zsource_codec_t fsgd_zsource_codec(const fsgd_zsource_t *z) { return z->codec; }

const char *fsgd_zsource_codec_name(fsgd_zsource_codec_t c)
{
    return c == FSGD_ZSOURCE_GZIP ? "gzip" : c == FSGD_ZSOURCE_ZSTD ? "zstd" : "plain";
}

int fsgd_zsource_is_stream(const fsgd_zsource_t *z) { return z->stream; }

void fsgd_zsource_close(fsgd_zsource_t *z)
{
    if (!z)
        return;
    if (z->own_fd)
        close(z->fd);
    if (z->zs_live)
        inflateEnd(&z->zs);
    ZSTD_freeDStream(z->zd);
    free(z->in);
    free(z->path);
    free(z);
}

int fsgd_zsource_check(const char *path, uint64_t *text_bytes, char *err, size_t errsz)
{
    uint64_t total = 0;
    fsgd_zsource_t *z = fsgd_zsource_open(path, err, errsz);
    if (!z)
        return FSGD_E_IO;
    ssize_t n = 0;
    if (z->codec != FSGD_ZSOURCE_PLAIN && !z->stream) {
        char *buf = malloc(IN_CAP);
        if (!buf)
            n = fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory checking '%s'", path);
        while (buf && (n = fsgd_zsource_read(z, buf, IN_CAP, err, errsz)) > 0)
            total += (uint64_t)n;
        free(buf);
    }
    fsgd_zsource_close(z);
    if (text_bytes)
        *text_bytes = total;
    return (int)n;
}

/* ---- as a stdio stream ---- */

static _Thread_local int last_code;
static _Thread_local char last_msg[512];

static ssize_t cookie_read(void *c, char *buf, size_t size)
{
    ssize_t n = fsgd_zsource_read(c, buf, size, last_msg, sizeof last_msg);
    if (n < 0) {
        last_code = (int)n;
        errno = EIO;
        return -1;
    }
    return n;
}

static int cookie_close(void *c)
{
    fsgd_zsource_close(c);
    return 0;
}

FILE *fsgd_zsource_fopen(const char *path, char *err, size_t errsz)
{
    fsgd_zsource_t *z = fsgd_zsource_open(path, err, errsz);
    if (!z)
        return NULL;
    cookie_io_functions_t io = {.read = cookie_read, .close = cookie_close};
    FILE *f = fopencookie(z, "r", io);
    if (!f) {
        fsgd_zsource_close(z);
        fsgd_err_fmt(err, errsz, FSGD_E_NOMEM, "out of memory opening '%s'", path);
    }
    return f;
}

int fsgd_zsource_file_error(char *err, size_t errsz)
{
    if (!last_code)
        return 0;
    return fsgd_err_fmt(err, errsz, last_code, "%s", last_msg);
}
