/* fsgd train's batches in an unlinked temporary file (train_spill.h). A
 * slice is stored as its row pointers, labels, columns and, unless binary,
 * values, back to back: one pwritev to write, one preadv to read. */
#include "train_spill.h"
#include "train_tmpfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fsgd/error.h"

uint64_t fsgd_spill_bytes(size_t rows, size_t nnz, int binary)
{
    return (uint64_t)(rows + 1) * sizeof(uint64_t) + (uint64_t)rows * sizeof(double) +
           (uint64_t)nnz * (sizeof(uint32_t) + (binary ? 0 : sizeof(float)));
}

int fsgd_spill_open(fsgd_spill_t *s, size_t n, int binary)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    s->binary = binary;
    atomic_init(&s->end, 0);
    s->at = malloc((n ? n : 1) * sizeof *s->at);
    if (!s->at)
        return FSGD_E_NOMEM;
    for (size_t i = 0; i < n; i++)
        s->at[i] = -1;
    s->fd = fsgd_train_tmpfile();
    s->file = s->fd >= 0;
    return FSGD_E_OK;
}

/* The slice's arrays as iovecs; the count. */
static int slice_iov(const fsgd_csr_t *m, int binary, struct iovec *iov)
{
    iov[0] = (struct iovec){m->row_ptr, (m->n_rows + 1) * sizeof *m->row_ptr};
    iov[1] = (struct iovec){m->label, m->n_rows * sizeof *m->label};
    iov[2] = (struct iovec){m->col, m->nnz * sizeof *m->col};
    if (binary)
        return 3;
    iov[3] = (struct iovec){m->val, m->nnz * sizeof *m->val};
    return 4;
}

/* All of the iovecs' bytes at off, written (to_file) or read; 0 or -1
 * with errno. Advances the iovecs. */
static int whole_v(int fd, int to_file, struct iovec *iov, int n, int64_t off)
{
    while (n > 0) {
        if (iov->iov_len == 0) {
            iov++, n--;
            continue;
        }
        ssize_t k = to_file ? pwritev(fd, iov, n, (off_t)off) : preadv(fd, iov, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO; /* cut short by someone else */
            return -1;
        }
        off += k;
        for (size_t left = (size_t)k; left > 0;) {
            size_t take = left < iov->iov_len ? left : iov->iov_len;
            iov->iov_base = (char *)iov->iov_base + take;
            iov->iov_len -= take;
            left -= take;
            if (iov->iov_len == 0)
                iov++, n--;
        }
    }
    return 0;
}

void fsgd_spill_put(fsgd_spill_t *s, size_t i, fsgd_csr_t *slice)
{
    if (!s->file || !slice->row_ptr)
        return;
    uint64_t bytes = fsgd_spill_bytes(slice->n_rows, slice->nnz, s->binary);
    int64_t off = (int64_t)atomic_fetch_add(&s->end, bytes);
    struct iovec iov[4];
    int n = slice_iov(slice, s->binary, iov);
    if (whole_v(s->fd, 1, iov, n, off) < 0)
        return; /* stays in memory; the hole in the file is never read */
    s->at[i] = off;
    free(slice->row_ptr);
    free(slice->label);
    free(slice->col);
    free(slice->val);
    slice->row_ptr = NULL;
    slice->label = NULL;
    slice->col = NULL;
    slice->val = NULL;
    slice->cap_rows = slice->cap_nnz = 0;
}

int fsgd_spill_get(const fsgd_spill_t *s, size_t i, const fsgd_csr_t *slice, fsgd_csr_t *buf,
                   const fsgd_csr_t **rows, char *err, size_t errsz)
{
    if (s->at == NULL || s->at[i] < 0) {
        *rows = slice;
        return FSGD_E_OK;
    }
    if (buf->cap_rows < slice->n_rows || buf->cap_nnz < slice->nnz || !buf->row_ptr) {
        fsgd_csr_free(buf);
        int rc = s->binary ? fsgd_csr_init_binary(buf, slice->n_rows, slice->nnz)
                           : fsgd_csr_reserve(buf, slice->n_rows, slice->nnz);
        if (rc < 0)
            return fsgd_err_fmt(err, errsz, rc, "out of memory for a batch of %zu rows", slice->n_rows);
    }
    buf->n_rows = slice->n_rows;
    buf->nnz = slice->nnz;
    buf->max_col = slice->max_col;
    struct iovec iov[4];
    int n = slice_iov(buf, s->binary, iov);
    if (whole_v(s->fd, 0, iov, n, s->at[i]) < 0)
        return fsgd_err_fmt(err, errsz, FSGD_E_IO, "reading batch slice %zu back from its temporary file: %s", i,
                            strerror(errno));
    *rows = buf;
    return FSGD_E_OK;
}

void fsgd_spill_close(fsgd_spill_t *s)
{
    if (s->file)
        close(s->fd);
    free(s->at);
    memset(s, 0, sizeof *s);
}
