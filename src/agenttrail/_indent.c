/* Compact JSON text indented in C (optional; agenttrail/codec.py does the same in Python and
 * uses it when this module was not built).
 *
 * indent(text, width, depth) gives the text json.dumps(value, ensure_ascii=False,
 * indent=width) writes, from the text json.dumps(value, ensure_ascii=False,
 * separators=(",", ":")) wrote of the same value (the standard library's C encoder, which
 * encodes with indent only in Python): a line break and width spaces a level after "[" and
 * "{" and after ",", one before "]" and "}", ": " for ":", and "[]" and "{}" kept as they
 * are. Strings are copied as they are: in compact JSON text a quote inside a string always
 * follows an odd number of backslashes, and no control character appears raw. depth: the
 * text as it is written nested that deep (its lines after the first indented depth levels
 * more). A width or level below one indents by nothing, as json.dumps does with indent=-1.
 *
 * The text is not validated: a string or bracket left open, or a close with no open, raises
 * ValueError, but brackets are counted, not matched, and what lies between the structure is
 * copied as it is. A text whose indentation would not fit in memory raises OverflowError.
 *
 * Indenting in Python, by splitting the text at its quotes, cost as much as the encoding
 * before it: a quarter of `agenttrail replay` of a long session (docs/benchmarks.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* The index of the quote that closes a string whose content starts at i, or -1. */
static Py_ssize_t string_end(int kind, const void *data, Py_ssize_t i, Py_ssize_t n) {
    for (;;) {
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *quote = memchr((const Py_UCS1 *)data + i, '"', (size_t)(n - i));
            if (quote == NULL) return -1;
            i = quote - (const Py_UCS1 *)data;
        } else if (kind == PyUnicode_2BYTE_KIND) {
            const Py_UCS2 *text = data;
            while (i < n && text[i] != '"') i++;
        } else {
            const Py_UCS4 *text = data;
            while (i < n && text[i] != '"') i++;
        }
        if (i >= n) return -1;
        Py_ssize_t start = i;
        while (PyUnicode_READ(kind, data, start - 1) == '\\') start--;  /* an opening quote stops it */
        if ((i - start) % 2 == 0) return i;  /* not escaped */
        i++;
    }
}

/* Where the indented text is written: nothing is, when data is NULL (the text is measured). */
typedef struct {
    void *data;
    int kind;
    Py_ssize_t at;    /* characters written (or measured) so far */
    Py_ssize_t room;  /* the most at may reach before a line break: what is left of the input
                         can add two characters for each of its own (":" gives ": ") */
} Writer;

static inline void put(Writer *out, Py_UCS4 c) {
    if (out->data != NULL) PyUnicode_WRITE(out->kind, out->data, out->at, c);
    out->at++;
}

/* A line feed and the spaces of `levels` levels `width` wide: none when that is not positive,
 * as Python's " " * n. -1 with OverflowError set when the text would be too long to hold. */
static int line_break(Writer *out, Py_ssize_t levels, Py_ssize_t width) {
    Py_ssize_t spaces = 0;
    if (levels > 0 && width > 0) {
        if (levels > (out->room - 1) / width) goto too_long;
        spaces = levels * width;
    }
    if (out->at > out->room - 1 - spaces) goto too_long;
    if (out->data != NULL) {
        PyUnicode_WRITE(out->kind, out->data, out->at, '\n');
        for (Py_ssize_t k = 1; k <= spaces; k++) PyUnicode_WRITE(out->kind, out->data, out->at + k, ' ');
    }
    out->at += 1 + spaces;
    return 0;
too_long:
    PyErr_SetString(PyExc_OverflowError, "the indented JSON text would be too long");
    return -1;
}

/* Writes the indented text into out (or measures it); returns its length, or -1 with an
 * exception set. Brackets are counted, not matched: compact JSON text has none unmatched. */
static Py_ssize_t indent_into(PyObject *text, Writer *out, Py_ssize_t width, Py_ssize_t depth) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), nesting = 0;
    if (depth > PY_SSIZE_T_MAX - n) {  /* depth + nesting must not overflow */
        PyErr_SetString(PyExc_OverflowError, "depth is too large");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c == '"') {
            Py_ssize_t end = string_end(kind, data, i + 1, n);
            if (end < 0) goto malformed;
            if (out->data != NULL) {
                memcpy((char *)out->data + out->at * kind, (const char *)data + i * kind,
                       (size_t)(end + 1 - i) * (size_t)kind);
            }
            out->at += end + 1 - i;
            i = end;
        } else if (c == '[' || c == '{') {
            put(out, c);
            if (i + 1 < n && PyUnicode_READ(kind, data, i + 1) == (c == '[' ? ']' : '}')) {
                put(out, c == '[' ? ']' : '}');  /* an empty array or object */
                i++;
                continue;
            }
            nesting++;
            if (line_break(out, depth + nesting, width) < 0) return -1;
        } else if (c == ']' || c == '}') {
            if (--nesting < 0) goto malformed;
            if (line_break(out, depth + nesting, width) < 0) return -1;
            put(out, c);
        } else if (c == ',') {
            put(out, ',');
            if (line_break(out, depth + nesting, width) < 0) return -1;
        } else if (c == ':') {
            put(out, ':');
            put(out, ' ');
        } else {
            put(out, c);
        }
    }
    if (nesting != 0) goto malformed;
    return out->at;
malformed:
    PyErr_SetString(PyExc_ValueError,
                    "not compact JSON text: a string or bracket left open, or a close with no open");
    return -1;
}

PyDoc_STRVAR(indent_doc,
             "indent(text, width, depth, /)\n--\n\n"
             "Compact JSON text as json.dumps writes it with indent=width, nested depth levels.");

static PyObject *indent(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *text;
    Py_ssize_t width, depth;
    if (!PyArg_ParseTuple(args, "Unn:indent", &text, &width, &depth)) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Writer measure = {NULL, PyUnicode_KIND(text), 0, PY_SSIZE_T_MAX - 2 * n};
    Py_ssize_t length = indent_into(text, &measure, width, depth);
    if (length < 0) return NULL;
    /* what indenting adds is ASCII, so the text keeps its widest character (and its kind) */
    PyObject *out = PyUnicode_New(length, PyUnicode_MAX_CHAR_VALUE(text));
    if (out == NULL) return NULL;
    Writer write = {PyUnicode_DATA(out), PyUnicode_KIND(out), 0, measure.room};
    Py_ssize_t written = indent_into(text, &write, width, depth);
    assert(written == length);
    (void)written;
    return out;
}

static PyMethodDef indent_methods[] = {
    {"indent", indent, METH_VARARGS, indent_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot indent_slots[] = {
    {0, NULL},
};

static struct PyModuleDef indent_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "agenttrail._indent",
    .m_doc = "Compact JSON text indented in C (agenttrail.codec).",
    .m_size = 0,
    .m_methods = indent_methods,
    .m_slots = indent_slots,
};

PyMODINIT_FUNC PyInit__indent(void) { return PyModuleDef_Init(&indent_module); }
