/* Canonical CBOR of a JSON-shaped payload in C (optional; agenttrail/codec.py has the same
 * rules in Python and uses them when this module was not built, or for what it leaves).
 *
 * encode(payload, max_depth) gives exactly cbor2.dumps(payload, canonical=True) (RFC 8949
 * §4.2: shortest heads, map keys length-first then bytewise, floats in their shortest exact
 * form) for a payload made only of dict with str keys, list, str, int, float, bool and None,
 * or None when the payload holds anything else: a subclass or another type, a text with lone
 * surrogates, an int beyond 64 bits, NaN or an infinity, or nesting of max_depth containers
 * below the top. codec.encode_payload then takes its Python path, which encodes what may be
 * encoded and names what may not. Nothing here calls back into Python, so the payload cannot
 * change while it is read.
 *
 * Encoding a payload was the costliest step of an import after parsing its JSON: a Python
 * walk ordering each map's keys, then cbor2 (docs/benchmarks.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A growing output buffer. */
typedef struct {
    unsigned char *data;
    size_t len;
    size_t cap;
} Out;

/* Encoding gives up (the Python path decides) or fails (a MemoryError is set). */
enum { OK = 0, LEAVE = 1, FAIL = -1 };

static int reserve(Out *out, size_t more) {
    if (out->len + more <= out->cap) return OK;
    size_t cap = out->cap ? out->cap : 256;
    while (cap < out->len + more) cap *= 2;
    unsigned char *data = PyMem_Realloc(out->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    out->data = data;
    out->cap = cap;
    return OK;
}

/* A CBOR head: major type and argument in its shortest form (RFC 8949 §4.2.1). */
static int put_head(Out *out, unsigned char major, unsigned long long value) {
    if (reserve(out, 9) != OK) return FAIL;
    unsigned char *at = out->data + out->len;
    major <<= 5;
    if (value < 24) {
        at[0] = major | (unsigned char)value;
        out->len += 1;
        return OK;
    }
    int width = value <= 0xff ? 1 : value <= 0xffff ? 2 : value <= 0xffffffffULL ? 4 : 8;
    at[0] = major | (width == 1 ? 24 : width == 2 ? 25 : width == 4 ? 26 : 27);
    for (int k = width; k >= 1; k--) {
        at[k] = (unsigned char)(value & 0xff);
        value >>= 8;
    }
    out->len += 1 + width;
    return OK;
}

static int put_bytes(Out *out, const void *bytes, size_t len) {
    if (reserve(out, len) != OK) return FAIL;
    memcpy(out->data + out->len, bytes, len);
    out->len += len;
    return OK;
}

/* A str's UTF-8 bytes: borrowed for an ASCII str, else in *holder (a new bytes object).
 * LEAVE for a str with lone surrogates (the Python path tags it). */
static int utf8_of(PyObject *text, const char **bytes, Py_ssize_t *len, PyObject **holder) {
    *holder = NULL;
    if (PyUnicode_IS_COMPACT_ASCII(text)) {
        *bytes = (const char *)PyUnicode_DATA(text);
        *len = PyUnicode_GET_LENGTH(text);
        return OK;
    }
    /* Not PyUnicode_AsUTF8AndSize: it would keep a UTF-8 copy inside every such str. */
    *holder = PyUnicode_AsUTF8String(text);
    if (*holder == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return FAIL;
        PyErr_Clear();
        return LEAVE;
    }
    *bytes = PyBytes_AS_STRING(*holder);
    *len = PyBytes_GET_SIZE(*holder);
    return OK;
}

static int put_text(Out *out, PyObject *text) {
    const char *bytes;
    Py_ssize_t len;
    PyObject *holder;
    int status = utf8_of(text, &bytes, &len, &holder);
    if (status == OK) {
        status = put_head(out, 3, (unsigned long long)len);
        if (status == OK) status = put_bytes(out, bytes, (size_t)len);
    }
    Py_XDECREF(holder);
    return status;
}

/* An int of at most 64 bits as major type 0 or 1; LEAVE for a wider one (a bignum tag). */
static int put_int(Out *out, PyObject *value) {
    int overflow;
    long long small = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (small == -1 && PyErr_Occurred()) return FAIL;
    if (overflow == 0) {
        if (small >= 0) return put_head(out, 0, (unsigned long long)small);
        return put_head(out, 1, (unsigned long long)(-(small + 1)));
    }
    if (overflow > 0) {
        unsigned long long big = PyLong_AsUnsignedLongLong(value);
        if (big == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return FAIL;
            PyErr_Clear();
            return LEAVE;
        }
        return put_head(out, 0, big);
    }
    /* Below -2**63: -1 - value fits 64 bits down to -2**64. */
    PyObject *one = PyLong_FromLong(1);
    PyObject *plus = one ? PyNumber_Add(value, one) : NULL;
    PyObject *magnitude = plus ? PyNumber_Negative(plus) : NULL;
    Py_XDECREF(one);
    Py_XDECREF(plus);
    if (magnitude == NULL) return FAIL;
    unsigned long long big = PyLong_AsUnsignedLongLong(magnitude);
    Py_DECREF(magnitude);
    if (big == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return FAIL;
        PyErr_Clear();
        return LEAVE;
    }
    return put_head(out, 1, big);
}

/* A finite float in the shortest of half, single and double precision that gives back the
 * same value (RFC 8949 §4.2.2); LEAVE for NaN or an infinity (the Python path refuses it). */
static int put_float(Out *out, double value) {
    if (!isfinite(value)) return LEAVE;
    unsigned char packed[9];
    if (PyFloat_Pack2(value, (char *)packed + 1, 0) == 0) {
        if (PyFloat_Unpack2((const char *)packed + 1, 0) == value) {
            packed[0] = 0xf9;
            return put_bytes(out, packed, 3);
        }
    } else {
        PyErr_Clear(); /* too large for half precision */
    }
    if (PyFloat_Pack4(value, (char *)packed + 1, 0) == 0) {
        if (PyFloat_Unpack4((const char *)packed + 1, 0) == value) {
            packed[0] = 0xfa;
            return put_bytes(out, packed, 5);
        }
    } else {
        PyErr_Clear();
    }
    if (PyFloat_Pack8(value, (char *)packed + 1, 0) != 0) return FAIL;
    packed[0] = 0xfb;
    return put_bytes(out, packed, 9);
}

/* A map key: its UTF-8 bytes and its value, sorted length-first then bytewise. */
typedef struct {
    const char *bytes;
    Py_ssize_t len;
    PyObject *holder;
    PyObject *value;
} Key;

static int key_order(const void *a, const void *b) {
    const Key *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->bytes, y->bytes, (size_t)x->len);
}

static int put_value(Out *out, PyObject *value, int depth, int max_depth);

static int put_map(Out *out, PyObject *map, int depth, int max_depth) {
    Py_ssize_t n = PyDict_GET_SIZE(map);
    Key small[16];
    Key *keys = n <= 16 ? small : PyMem_Malloc(sizeof(Key) * (size_t)n);
    if (keys == NULL) {
        PyErr_NoMemory();
        return FAIL;
    }
    Py_ssize_t pos = 0, taken = 0;
    PyObject *key, *item;
    int status = OK;
    while (status == OK && PyDict_Next(map, &pos, &key, &item)) {
        if (!PyUnicode_CheckExact(key)) {
            status = LEAVE;
            break;
        }
        status = utf8_of(key, &keys[taken].bytes, &keys[taken].len, &keys[taken].holder);
        if (status == OK) keys[taken++].value = item;
    }
    if (status == OK) {
        qsort(keys, (size_t)taken, sizeof(Key), key_order);
        status = put_head(out, 5, (unsigned long long)taken);
    }
    for (Py_ssize_t i = 0; status == OK && i < taken; i++) {
        status = put_head(out, 3, (unsigned long long)keys[i].len);
        if (status == OK) status = put_bytes(out, keys[i].bytes, (size_t)keys[i].len);
        if (status == OK) status = put_value(out, keys[i].value, depth + 1, max_depth);
    }
    for (Py_ssize_t i = 0; i < taken; i++) Py_XDECREF(keys[i].holder);
    if (keys != small) PyMem_Free(keys);
    return status;
}

static int put_value(Out *out, PyObject *value, int depth, int max_depth) {
    if (PyUnicode_CheckExact(value)) return put_text(out, value);
    if (value == Py_None) return put_bytes(out, "\xf6", 1);
    if (value == Py_True) return put_bytes(out, "\xf5", 1);
    if (value == Py_False) return put_bytes(out, "\xf4", 1);
    if (PyLong_CheckExact(value)) return put_int(out, value);
    if (PyFloat_CheckExact(value)) return put_float(out, PyFloat_AS_DOUBLE(value));
    if (depth >= max_depth) return LEAVE;
    if (PyDict_CheckExact(value)) return put_map(out, value, depth, max_depth);
    if (PyList_CheckExact(value)) {
        Py_ssize_t n = PyList_GET_SIZE(value);
        int status = put_head(out, 4, (unsigned long long)n);
        for (Py_ssize_t i = 0; status == OK && i < n; i++) {
            /* The list cannot change meanwhile: nothing here runs Python code. */
            status = put_value(out, PyList_GET_ITEM(value, i), depth + 1, max_depth);
        }
        return status;
    }
    return LEAVE;
}

PyDoc_STRVAR(encode_doc,
             "encode(payload, max_depth, /) -> bytes | None\n\n"
             "cbor2.dumps(payload, canonical=True) for a dict made only of dict (str keys), "
             "list, str, int (64 bits), finite float, bool and None, nested at most max_depth "
             "containers below the top; None for any other payload (agenttrail.codec).");

static PyObject *encode(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *payload;
    int max_depth;
    if (!PyArg_ParseTuple(args, "Oi:encode", &payload, &max_depth)) return NULL;
    if (!PyDict_CheckExact(payload)) Py_RETURN_NONE;
    Out out = {NULL, 0, 0};
    int status = put_map(&out, payload, 0, max_depth);
    PyObject *result = NULL;
    if (status == OK) {
        result = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    } else if (status == LEAVE) {
        result = Py_NewRef(Py_None);
    }
    PyMem_Free(out.data);
    return result;
}

static PyMethodDef cbor_methods[] = {
    {"encode", encode, METH_VARARGS, encode_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot cbor_slots[] = {
    {0, NULL},
};

static struct PyModuleDef cbor_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "agenttrail._cbor",
    .m_doc = "Canonical CBOR of a JSON-shaped payload in C (agenttrail.codec).",
    .m_size = 0,
    .m_methods = cbor_methods,
    .m_slots = cbor_slots,
};

PyMODINIT_FUNC PyInit__cbor(void) { return PyModuleDef_Init(&cbor_module); }
