/* The chain check of `agenttrail verify` in C, and the chain hashes of new v2 rows for an
 * append (optional; agenttrail/log/chain.py and digests.py have the same code in Python and
 * use it when this module was not built).
 *
 * Reading a row out of SQLite into Python costs about as much as hashing it, so a Python loop
 * around hashlib spends most of verify's time outside SHA-256 (docs/benchmarks.md). This
 * module runs the per-row part -- seq check, preimage, SHA-256 (OpenSSL's, as hashlib's),
 * compare -- for a page of rows in one call, with the GIL released while it hashes, so that
 * another thread can read the next page meanwhile. It only says where the first bad row is;
 * why it is bad is worked out in Python (chain.py), so each rule is stated once.
 *
 * Preimage of a row (docs/log-format.md, "The hash chain"):
 *   tag || prev_hash (32) || seq (u64 BE) || len(created_at) (u32 BE) || created_at (ASCII)
 *       || len(session_id) (u32 BE) || session_id (UTF-8) || len(payload) (u64 BE) || payload
 * where prev_hash is the previous row's stored hash.
 *
 * Chain v2 (first_bad_row_v2; agenttrail/log/digests.py): rows carry a salt and a digest;
 *   digest == SHA-256(salt || payload), and the preimage ends with the 32-byte digest in place
 *   of len(payload) || payload. An erased row (no salt) is reported as bad: Python checks it
 *   against the session's erasures.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/evp.h>
#include <string.h>

#define HASH_LEN 32
#define SALT_LEN 32
#define U32_MAX 0xffffffffULL

/* OpenSSL's SHA-256, fetched once (under the GIL) and kept for the life of the process:
 * letting OpenSSL 3 look it up on every use costs more than hashing a small row. */
static EVP_MD *sha256_md = NULL;

/* One row's bytes, borrowed from the Python objects of a page held alive by the caller. */
typedef struct {
    unsigned long long seq;
    const char *created;
    size_t created_len;
    const char *payload;
    size_t payload_len;
    const char *stored;
    const char *salt;   /* v2 only */
    const char *digest; /* v2 only */
} Row;

static unsigned char *put_be(unsigned char *out, unsigned long long value, int width) {
    for (int k = width - 1; k >= 0; k--) {
        out[k] = (unsigned char)(value & 0xff);
        value >>= 8;
    }
    return out + width;
}

static unsigned char *put(unsigned char *out, const void *bytes, size_t len) {
    memcpy(out, bytes, len);
    return out + len;
}

/* Borrow a row's created_at (an ASCII str) and payload (bytes) into *row. */
static void borrow_time_and_payload(Row *row, PyObject *created, PyObject *payload) {
    row->created = PyUnicode_DATA(created);
    row->created_len = (size_t)PyUnicode_GET_LENGTH(created);
    row->payload = PyBytes_AS_STRING(payload);
    row->payload_len = (size_t)PyBytes_GET_SIZE(payload);
}

/* Borrow row i's bytes into *row. 1 when the row has the shape the store writes (int, ASCII
 * str, bytes, 32 bytes) and seq `expected`; 0 when it does not (a bad row); -1 on error. */
static int borrow_row(PyObject *item, long long expected, Row *row, int version) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 6) {
        PyErr_SetString(PyExc_TypeError, "first_bad_row: each row must be a 6-tuple");
        return -1;
    }
    PyObject *salt = PyTuple_GET_ITEM(item, 4);
    PyObject *digest = PyTuple_GET_ITEM(item, 5);
    if (version == 1) {
        if (salt != Py_None || digest != Py_None) {
            return 0;
        }
        row->salt = row->digest = NULL;
    } else {
        if (!PyBytes_CheckExact(salt) || PyBytes_GET_SIZE(salt) != SALT_LEN
            || !PyBytes_CheckExact(digest) || PyBytes_GET_SIZE(digest) != HASH_LEN) {
            return 0;
        }
        row->salt = PyBytes_AS_STRING(salt);
        row->digest = PyBytes_AS_STRING(digest);
    }
    PyObject *seq = PyTuple_GET_ITEM(item, 0);
    PyObject *created = PyTuple_GET_ITEM(item, 1);
    PyObject *payload = PyTuple_GET_ITEM(item, 2);
    PyObject *stored = PyTuple_GET_ITEM(item, 3);
    if (!PyLong_CheckExact(seq) || !PyUnicode_CheckExact(created) || !PyUnicode_IS_ASCII(created)
        || !PyBytes_CheckExact(payload) || !PyBytes_CheckExact(stored)
        || PyBytes_GET_SIZE(stored) != HASH_LEN
        || (unsigned long long)PyUnicode_GET_LENGTH(created) > U32_MAX) {
        return 0;
    }
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(seq, &overflow);
    if (overflow || value != expected) {
        return 0;
    }
    row->seq = (unsigned long long)value;
    borrow_time_and_payload(row, created, payload);
    row->stored = PyBytes_AS_STRING(stored);
    return 1;
}

/* The head of a row's preimage, up to the payload part, at `at`; returns its end. */
static unsigned char *put_head(unsigned char *at, const Py_buffer *tag, const char *prev,
                               const Row *row, const Py_buffer *sid) {
    at = put(at, tag->buf, (size_t)tag->len);
    at = put(at, prev, HASH_LEN);
    at = put_be(at, row->seq, 8);
    at = put_be(at, row->created_len, 4);
    at = put(at, row->created, row->created_len);
    at = put_be(at, (unsigned long long)sid->len, 4);
    return put(at, sid->buf, (size_t)sid->len);
}

/* SHA-256 of a || b into out (HASH_LEN bytes); 0 when OpenSSL fails. One context serves
 * every hash of a page: EVP_Digest would allocate and free one per call. */
static int sha256_of(const EVP_MD *md, EVP_MD_CTX *ctx, const void *a, size_t a_len,
                     const void *b, size_t b_len, unsigned char *out) {
    unsigned int out_len = 0;
    return EVP_DigestInit_ex(ctx, md, NULL) && EVP_DigestUpdate(ctx, a, a_len)
        && EVP_DigestUpdate(ctx, b, b_len) && EVP_DigestFinal_ex(ctx, out, &out_len)
        && out_len == HASH_LEN;
}

/* Index of the first of rows[0..n) whose stored hash is not its chain hash, n when all match,
 * -1 when OpenSSL fails. Touches no Python object: runs without the GIL. `head` has room for
 * the longest preimage head of the page. The indexes of the good rows whose payload holds
 * `mark` (when mark_len > 0) go to marked[0..*n_marked). */
static Py_ssize_t first_mismatch(const EVP_MD *md, EVP_MD_CTX *ctx, const Py_buffer *tag,
                                 const Py_buffer *sid, const char *prev, const Row *rows,
                                 Py_ssize_t n, unsigned char *head, const Py_buffer *mark,
                                 Py_ssize_t *marked, Py_ssize_t *n_marked) {
    *n_marked = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Row *row = &rows[i];
        unsigned char *at = put_head(head, tag, i ? rows[i - 1].stored : prev, row, sid);
        unsigned char digest[HASH_LEN];
        if (row->salt != NULL) { /* v2: the salted digest, then the row over it */
            if (!sha256_of(md, ctx, row->salt, SALT_LEN, row->payload, row->payload_len, digest)) {
                return -1;
            }
            if (memcmp(digest, row->digest, HASH_LEN) != 0) {
                return i;
            }
            at = put(at, row->digest, HASH_LEN);
            if (!sha256_of(md, ctx, head, (size_t)(at - head), NULL, 0, digest)) {
                return -1;
            }
        } else {
            at = put_be(at, row->payload_len, 8);
            if (!sha256_of(md, ctx, head, (size_t)(at - head), row->payload, row->payload_len,
                           digest)) {
                return -1;
            }
        }
        if (memcmp(digest, row->stored, HASH_LEN) != 0) {
            return i;
        }
        if (mark->len > 0
            && memmem(row->payload, row->payload_len, mark->buf, (size_t)mark->len) != NULL) {
            marked[(*n_marked)++] = i;
        }
    }
    return n;
}

/* The rows of `list` as a tuple in *page (alive and in place without the GIL), after the
 * checks every function here makes of its arguments, and room for as many Rows in *rows (the
 * caller frees both); their count, or -1 with a Python error set (naming `function`). */
static Py_ssize_t take_page(const char *function, const Py_buffer *sid, const Py_buffer *prev,
                            PyObject *list, long long first_seq, PyObject **page, Row **rows) {
    if (prev->len != HASH_LEN) {
        PyErr_Format(PyExc_ValueError, "%s: prev_hash must be 32 bytes", function);
        return -1;
    }
    if ((unsigned long long)sid->len > U32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: session_id is too long", function);
        return -1;
    }
    *page = PyList_AsTuple(list);
    if (*page == NULL) {
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(*page);
    if (first_seq < 0 || first_seq > LLONG_MAX - n) {
        PyErr_Format(PyExc_ValueError, "%s: first_seq out of range", function);
        return -1;
    }
    *rows = PyMem_New(Row, n ? n : 1);
    if (*rows == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return n;
}

/* SHA-256 fetched once, and a context and a buffer for the longest preimage head of a page
 * (its longest created_at `longest` bytes); 0 (with a Python error set) when one cannot be
 * had. */
static int hashing_start(const Py_buffer *tag, const Py_buffer *sid, size_t longest,
                         EVP_MD_CTX **ctx, unsigned char **head) {
    *head = PyMem_Malloc((size_t)tag->len + HASH_LEN + 8 + 4 + longest + 4 + (size_t)sid->len
                         + HASH_LEN);
    *ctx = EVP_MD_CTX_new();
    if (sha256_md == NULL) {
        sha256_md = EVP_MD_fetch(NULL, "SHA2-256", NULL);
    }
    if (*head == NULL || *ctx == NULL || sha256_md == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    return 1;
}

/* Free what a page's call took: its hashing context and head buffer (hashing_start), its
 * rows and their tuple (take_page), and the argument buffers. NULLs are skipped. */
static void end_page(EVP_MD_CTX *ctx, unsigned char *head, Row *rows, PyObject *page,
                     Py_buffer *tag, Py_buffer *sid, Py_buffer *prev) {
    EVP_MD_CTX_free(ctx);
    PyMem_Free(head);
    PyMem_Free(rows);
    Py_XDECREF(page);
    PyBuffer_Release(tag);
    PyBuffer_Release(sid);
    PyBuffer_Release(prev);
}

PyDoc_STRVAR(first_bad_row_doc,
"first_bad_row(tag, session_id, prev_hash, rows, first_seq, /) -> int\n"
"\n"
"Index of the first row of ``rows`` that does not verify, or -1 when all do.\n"
"\n"
"``rows`` is a list of ``(seq, created_at, payload, hash, None, None)`` tuples in seq order\n"
"(a v1 row has no salt and no digest); row i must\n"
"have seq ``first_seq + i`` and a stored hash equal to the chain hash of its bytes, the\n"
"previous row's stored hash (``prev_hash`` for row 0), ``tag`` and ``session_id`` (UTF-8).\n"
"A column of another type than the store writes (int, ASCII str, bytes, 32 bytes) is a bad\n"
"row. The GIL is released while the rows are hashed.\n"
"\n"
"Raises TypeError for arguments of the wrong shape, ValueError for a prev_hash that is not\n"
"32 bytes or a first_seq below 0 or too large, RuntimeError if OpenSSL's SHA-256 fails.");

/* first_bad_row (version 1, no mark) and first_bad_row_v2 (version 2, with a mark): the index
 * of the first bad row or -1, and for v2 a tuple of it and the list of marked rows. */
static PyObject *check_page(PyObject *args, int version) {
    Py_buffer tag, sid, prev;
    Py_buffer mark = {.buf = NULL, .len = 0};
    PyObject *list;
    long long first_seq;
    int parsed = version == 1
        ? PyArg_ParseTuple(args, "y*y*y*O!L:first_bad_row", &tag, &sid, &prev, &PyList_Type,
                           &list, &first_seq)
        : PyArg_ParseTuple(args, "y*y*y*O!Ly*:first_bad_row_v2", &tag, &sid, &prev,
                           &PyList_Type, &list, &first_seq, &mark);
    if (!parsed) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t *marked = NULL;
    PyObject *page = NULL; /* a tuple: the rows stay alive and in place without the GIL */
    Row *rows = NULL;
    unsigned char *head = NULL;
    EVP_MD_CTX *ctx = NULL;
    Py_ssize_t n = take_page("first_bad_row", &sid, &prev, list, first_seq, &page, &rows);
    if (n < 0) {
        goto done;
    }
    marked = PyMem_New(Py_ssize_t, n ? n : 1);
    if (marked == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Rows of the wrong shape end the page early: the rows before it are still hashed. */
    Py_ssize_t shaped = 0;
    size_t longest = 0;
    for (; shaped < n; shaped++) {
        int ok = borrow_row(PyTuple_GET_ITEM(page, shaped), first_seq + shaped, &rows[shaped],
                            version);
        if (ok < 0) {
            goto done;
        }
        if (!ok) {
            break;
        }
        if (rows[shaped].created_len > longest) {
            longest = rows[shaped].created_len;
        }
    }
    if (!hashing_start(&tag, &sid, longest, &ctx, &head)) {
        goto done;
    }
    Py_ssize_t mismatch;
    Py_ssize_t n_marked = 0;
    Py_BEGIN_ALLOW_THREADS
    mismatch = first_mismatch(sha256_md, ctx, &tag, &sid, prev.buf, rows, shaped, head, &mark,
                              marked, &n_marked);
    Py_END_ALLOW_THREADS
    if (mismatch < 0) {
        PyErr_SetString(PyExc_RuntimeError, "first_bad_row: OpenSSL SHA-256 failed");
        goto done;
    }
    if (version == 1) {
        result = PyLong_FromSsize_t(mismatch == n ? -1 : mismatch);
        goto done;
    }
    PyObject *found = PyList_New(n_marked);
    if (found == NULL) {
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_marked; k++) {
        PyObject *index = PyLong_FromSsize_t(marked[k]);
        if (index == NULL) {
            Py_DECREF(found);
            goto done;
        }
        PyList_SET_ITEM(found, k, index);
    }
    result = Py_BuildValue("nN", mismatch == n ? (Py_ssize_t)-1 : mismatch, found);
done:
    PyMem_Free(marked);
    end_page(ctx, head, rows, page, &tag, &sid, &prev);
    if (mark.buf != NULL) {
        PyBuffer_Release(&mark);
    }
    return result;
}

static PyObject *first_bad_row(PyObject *Py_UNUSED(module), PyObject *args) {
    return check_page(args, 1);
}

PyDoc_STRVAR(first_bad_row_v2_doc,
"first_bad_row_v2(tag, session_id, prev_hash, rows, first_seq, mark, /) -> (int, list)\n"
"\n"
"As first_bad_row, for chain v2: each row is (seq, created_at, payload, hash, salt, digest),\n"
"the digest must be SHA-256(salt || payload) and the chain hash covers the digest in place of\n"
"the payload. A row without a 32-byte salt and digest (an erased row) is a bad row here.\n"
"Returns the index of the first bad row (-1 when all verify) and the indexes, in order, of\n"
"the good rows before it whose payload contains the bytes ``mark`` (none when it is empty):\n"
"verify decodes only those, to find the erasure events.");

static PyObject *first_bad_row_v2(PyObject *Py_UNUSED(module), PyObject *args) {
    return check_page(args, 2);
}

PyDoc_STRVAR(chain_rows_v2_doc,
"chain_rows_v2(tag, session_id, prev_hash, first_seq, rows, /) -> (list, list)\n"
"\n"
"The digests and chain hashes of new v2 rows: ``rows`` is a list of ``(created_at, payload,\n"
"salt)`` tuples (ASCII str, bytes, 32 bytes) getting seqs ``first_seq``, ``first_seq + 1``\n"
"...; row i's digest is SHA-256(salt || payload) and its hash chains to row i - 1's\n"
"(``prev_hash`` for row 0), as first_bad_row_v2 checks them. The GIL is released while the\n"
"rows are hashed.\n"
"\n"
"Raises TypeError for a row of another shape, ValueError for a prev_hash or salt that is not\n"
"32 bytes or a first_seq out of range, RuntimeError if OpenSSL's SHA-256 fails.");

/* Each row's digest then hash into out[64 i .. 64 i + 64). -1 when OpenSSL fails. */
static int chain_rows(const EVP_MD *md, EVP_MD_CTX *ctx, const Py_buffer *tag,
                      const Py_buffer *sid, const char *prev, const Row *rows, Py_ssize_t n,
                      unsigned char *head, unsigned char *out) {
    for (Py_ssize_t i = 0; i < n; i++) {
        const Row *row = &rows[i];
        unsigned char *digest = out + 2 * HASH_LEN * i;
        if (!sha256_of(md, ctx, row->salt, SALT_LEN, row->payload, row->payload_len, digest)) {
            return -1;
        }
        const char *link = i ? (const char *)digest - HASH_LEN : prev; /* row i - 1's hash */
        unsigned char *at = put_head(head, tag, link, row, sid);
        at = put(at, digest, HASH_LEN);
        if (!sha256_of(md, ctx, head, (size_t)(at - head), NULL, 0, digest + HASH_LEN)) {
            return -1;
        }
    }
    return 0;
}

/* A list of the n hashes of HASH_LEN bytes at out + offset, out + offset + 64 ... */
static PyObject *hash_list(const unsigned char *out, Py_ssize_t n, size_t offset) {
    PyObject *list = PyList_New(n);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item =
            PyBytes_FromStringAndSize((const char *)out + 2 * HASH_LEN * i + offset, HASH_LEN);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* Borrow new row i (created_at, payload, salt) into *row with seq `seq`; 0 with a Python
 * error set when it has another shape. */
static int borrow_new_row(PyObject *item, unsigned long long seq, Row *row) {
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3
        || !PyUnicode_CheckExact(PyTuple_GET_ITEM(item, 0))
        || !PyUnicode_IS_ASCII(PyTuple_GET_ITEM(item, 0))
        || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1))
        || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 2))) {
        PyErr_SetString(PyExc_TypeError,
                        "chain_rows_v2: each row must be (ASCII str, bytes, bytes)");
        return 0;
    }
    PyObject *created = PyTuple_GET_ITEM(item, 0);
    PyObject *payload = PyTuple_GET_ITEM(item, 1);
    PyObject *salt = PyTuple_GET_ITEM(item, 2);
    if (PyBytes_GET_SIZE(salt) != SALT_LEN
        || (unsigned long long)PyUnicode_GET_LENGTH(created) > U32_MAX) {
        PyErr_SetString(PyExc_ValueError, "chain_rows_v2: a salt must be 32 bytes");
        return 0;
    }
    row->seq = seq;
    borrow_time_and_payload(row, created, payload);
    row->salt = PyBytes_AS_STRING(salt);
    return 1;
}

static PyObject *chain_rows_v2(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer tag, sid, prev;
    PyObject *list;
    long long first_seq;
    if (!PyArg_ParseTuple(args, "y*y*y*LO!:chain_rows_v2", &tag, &sid, &prev, &first_seq,
                          &PyList_Type, &list)) {
        return NULL;
    }
    PyObject *result = NULL;
    PyObject *page = NULL; /* a tuple: the rows stay alive and in place without the GIL */
    Row *rows = NULL;
    unsigned char *head = NULL;
    unsigned char *out = NULL;
    EVP_MD_CTX *ctx = NULL;
    Py_ssize_t n = take_page("chain_rows_v2", &sid, &prev, list, first_seq, &page, &rows);
    if (n < 0) {
        goto done;
    }
    out = PyMem_Malloc((size_t)(n ? n : 1) * 2 * HASH_LEN);
    if (out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    size_t longest = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!borrow_new_row(PyTuple_GET_ITEM(page, i), (unsigned long long)(first_seq + i),
                            &rows[i])) {
            goto done;
        }
        if (rows[i].created_len > longest) {
            longest = rows[i].created_len;
        }
    }
    if (!hashing_start(&tag, &sid, longest, &ctx, &head)) {
        goto done;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = chain_rows(sha256_md, ctx, &tag, &sid, prev.buf, rows, n, head, out);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_SetString(PyExc_RuntimeError, "chain_rows_v2: OpenSSL SHA-256 failed");
        goto done;
    }
    PyObject *digests = hash_list(out, n, 0);
    PyObject *hashes = digests == NULL ? NULL : hash_list(out, n, HASH_LEN);
    if (hashes != NULL) {
        result = Py_BuildValue("NN", digests, hashes);
    } else {
        Py_XDECREF(digests);
    }
done:
    PyMem_Free(out);
    end_page(ctx, head, rows, page, &tag, &sid, &prev);
    return result;
}

static PyMethodDef speedups_methods[] = {
    {"first_bad_row", first_bad_row, METH_VARARGS, first_bad_row_doc},
    {"first_bad_row_v2", first_bad_row_v2, METH_VARARGS, first_bad_row_v2_doc},
    {"chain_rows_v2", chain_rows_v2, METH_VARARGS, chain_rows_v2_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot speedups_slots[] = {
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "agenttrail._speedups",
    .m_doc = "The chain check of verify and the hashes of new rows in C (see agenttrail.log.chain"
              " and agenttrail.log.digests).",
    .m_size = 0,
    .m_methods = speedups_methods,
    .m_slots = speedups_slots,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModuleDef_Init(&speedups_module); }
