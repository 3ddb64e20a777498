/* The indexing tokenizer's one scan, in C: an optional speed-up of `text.index_texts`.
 *
 * Design idea: cutting a message into tokens is most of a bulk import's parse work
 * (`text.tokenize` spends ~200 us on a 700-character message, in a dozen regex passes
 * and list operations). The index needs only three space-joined strings, which one
 * pass over the code points can build. This module does that pass and nothing else:
 * case folding, script folding and identifier parts stay in Python (`text.index_texts`),
 * so there is one definition of each rule. `text.tokenize` is the reference; the tests
 * check both give the same tokens, and without a C compiler the package uses the
 * Python path (the extension is optional at install).
 *
 * cut(text) -> (chars, grams, words, identifiers), each a str of tokens joined by single spaces:
 *   chars  every distinct CJK character, in order of first appearance (`text._CJK_RUN`)
 *   grams  every pair of adjacent CJK characters     (the bigrams of each run)
 *   words  every run of 2+ word characters that are not CJK, as typed  (`text._WORDS`)
 *   identifiers  the words among them with an '_' or a camelCase step (`text._CAMEL`), whose
 *          parts `text._identifier_parts` adds
 * A word character is what `re`'s \w matches in a str pattern: alphanumeric or '_'.
 *
 * Three scans more serve `text.fold_chinese` and `text.surface_text`, over tables Python builds
 * (the rules stay there): `any_set` (may opencc change this text?), `fold` (the text folded by
 * the table, where that is what opencc would give) and `surface` (the characters typed in a
 * script that folds to another).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Keep in step with `text._CJK_RANGES`. */
static int
is_cjk(Py_UCS4 c)
{
    if (c < 0x3040)
        return 0;
    return (c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
           (c >= 0xAC00 && c <= 0xD7AF) || (c >= 0xF900 && c <= 0xFAFF) ||
           (c >= 0x20000 && c <= 0x2EBEF) || (c >= 0x30000 && c <= 0x323AF) ||
           (c >= 0x2F800 && c <= 0x2FA1F);
}

static int
is_word(Py_UCS4 c)
{
    return c == '_' || Py_UNICODE_ISALNUM(c);
}

typedef struct {
    Py_UCS4 *data;
    Py_ssize_t len;
} Buffer;

/* The CJK characters seen so far: open addressing over a power of two at least twice the text's
 * length (0 is never a CJK character, so it marks a free slot). */
typedef struct {
    Py_UCS4 *slots;
    size_t mask;
} Seen;

static int
first_time(Seen *seen, Py_UCS4 c)
{
    size_t i = ((size_t)c * 2654435761u) & seen->mask;
    while (seen->slots[i]) {
        if (seen->slots[i] == c)
            return 0;
        i = (i + 1) & seen->mask;
    }
    seen->slots[i] = c;
    return 1;
}

static void
put_token_start(Buffer *b)
{
    if (b->len)
        b->data[b->len++] = ' ';
}

static void
put_word(Buffer *b, int kind, const void *text, Py_ssize_t start, Py_ssize_t end)
{
    put_token_start(b);
    for (Py_ssize_t j = start; j < end; j++)
        b->data[b->len++] = PyUnicode_READ(kind, text, j);
}

static int
is_lower_ascii(Py_UCS4 c)
{
    return c >= 'a' && c <= 'z';
}

static PyObject *
to_str(Buffer *b)
{
    return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, b->data, b->len);
}

static PyObject *
cut(PyObject *module, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "cut() takes a str");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int kind = PyUnicode_KIND(arg);
    const void *text = PyUnicode_DATA(arg);
    /* worst cases: chars 2n (every character CJK), grams 3n (likewise), words and identifiers 2n */
    Py_UCS4 *memory = PyMem_Malloc(sizeof(Py_UCS4) * (size_t)(9 * n + 4));
    if (memory == NULL)
        return PyErr_NoMemory();
    Buffer chars = {memory, 0}, grams = {memory + 2 * n + 1, 0}, words = {memory + 5 * n + 2, 0};
    Buffer identifiers = {memory + 7 * n + 3, 0};
    size_t slots = 16;
    while (slots < 2 * (size_t)n)
        slots <<= 1;
    Seen seen = {PyMem_Calloc(slots, sizeof(Py_UCS4)), slots - 1};
    if (seen.slots == NULL) {
        PyMem_Free(memory);
        return PyErr_NoMemory();
    }
    int identifier = 0;           /* the current word has an '_' or a camelCase step */
    Py_UCS4 prev_cjk = 0;         /* the previous character, if it was CJK */
    Py_ssize_t word_start = -1;   /* where the current word began in `text` */
    for (Py_ssize_t i = 0; i <= n; i++) {
        Py_UCS4 c = i < n ? PyUnicode_READ(kind, text, i) : 0;
        int cjk = i < n && is_cjk(c);
        int word = i < n && !cjk && is_word(c);
        if (word) {
            if (word_start < 0) {
                word_start = i;
                identifier = 0;
            }
            identifier |= c == '_' || (c >= 'A' && c <= 'Z' && i > word_start && is_lower_ascii(PyUnicode_READ(kind, text, i - 1)));
        } else if (word_start >= 0) {
            if (i - word_start >= 2) {
                put_word(&words, kind, text, word_start, i);
                if (identifier)
                    put_word(&identifiers, kind, text, word_start, i);
            }
            word_start = -1;
        }
        if (cjk) {
            if (first_time(&seen, c)) {
                put_token_start(&chars);
                chars.data[chars.len++] = c;
            }
            if (prev_cjk) {
                put_token_start(&grams);
                grams.data[grams.len++] = prev_cjk;
                grams.data[grams.len++] = c;
            }
            prev_cjk = c;
        } else {
            prev_cjk = 0;
        }
    }
    PyObject *result = NULL;
    PyObject *a = to_str(&chars), *b = a ? to_str(&grams) : NULL, *w = b ? to_str(&words) : NULL;
    PyObject *d = w ? to_str(&identifiers) : NULL;
    if (d != NULL)
        result = PyTuple_Pack(4, a, b, w, d);
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(w);
    Py_XDECREF(d);
    PyMem_Free(memory);
    PyMem_Free(seen.slots);
    return result;
}

static int
by_code_point(const void *a, const void *b)
{
    Py_UCS4 x = *(const Py_UCS4 *)a, y = *(const Py_UCS4 *)b;
    return (x > y) - (x < y);
}

/* The arguments of `surface`, `any_set` and `fold`: a str, read in place, and a bytes table. */
typedef struct {
    Py_buffer table;
    Py_ssize_t n;     /* the text's length */
    int kind;         /* and its storage, for PyUnicode_READ */
    const void *text;
} TextAndTable;

/* 0 with `args->table` held (release it), or -1 with the error set. */
static int
text_and_table(const char *name, PyObject *const *argv, Py_ssize_t nargs, TextAndTable *args)
{
    if (nargs != 2 || !PyUnicode_Check(argv[0])) {
        PyErr_Format(PyExc_TypeError, "%s() takes a str and a bytes table", name);
        return -1;
    }
    args->n = PyUnicode_GET_LENGTH(argv[0]);
    args->kind = PyUnicode_KIND(argv[0]);
    args->text = PyUnicode_DATA(argv[0]);
    return PyObject_GetBuffer(argv[1], &args->table, PyBUF_SIMPLE);
}

/* surface(text, table) -> the distinct characters of text whose bit is set in `table` (a bitmap
 * over the Basic Multilingual Plane, bit c % 8 of byte c / 8), in code point order, space-joined:
 * `text.surface_chars`, for the characters that fold to another script. */
static PyObject *
surface(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    TextAndTable a;
    if (text_and_table("surface", args, nargs, &a) < 0)
        return NULL;
    const unsigned char *bits = a.table.buf;
    Py_ssize_t limit = a.table.len * 8;
    Py_ssize_t n = a.n;
    size_t slots = 16;
    while (slots < 2 * (size_t)n)
        slots <<= 1;
    Seen seen = {PyMem_Calloc(slots, sizeof(Py_UCS4)), slots - 1};
    Py_UCS4 *found = PyMem_Malloc(sizeof(Py_UCS4) * (size_t)(3 * n + 1));  /* the characters, then them joined */
    if (seen.slots == NULL || found == NULL) {
        PyMem_Free(seen.slots);
        PyMem_Free(found);
        PyBuffer_Release(&a.table);
        return PyErr_NoMemory();
    }
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(a.kind, a.text, i);
        if (c && (Py_ssize_t)c < limit && (bits[c >> 3] >> (c & 7)) & 1 && first_time(&seen, c))
            found[count++] = c;
    }
    PyBuffer_Release(&a.table);
    qsort(found, (size_t)count, sizeof(Py_UCS4), by_code_point);
    Buffer out = {found + count, 0};
    for (Py_ssize_t i = 0; i < count; i++) {
        put_token_start(&out);
        out.data[out.len++] = found[i];
    }
    PyObject *result = to_str(&out);
    PyMem_Free(seen.slots);
    PyMem_Free(found);
    return result;
}

/* any_set(text, table) -> whether text holds a character whose bit is set in `table` (a bitmap over
 * the Basic Multilingual Plane, as `surface` reads it) or one beyond the table: `text.fold_chinese`,
 * for the text opencc would leave as it is. */
static PyObject *
any_set(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    TextAndTable a;
    if (text_and_table("any_set", args, nargs, &a) < 0)
        return NULL;
    const unsigned char *bits = a.table.buf;
    Py_UCS4 limit = (Py_UCS4)(a.table.len * 8);
    int found = 0;
    for (Py_ssize_t i = 0; i < a.n && !found; i++) {
        Py_UCS4 c = PyUnicode_READ(a.kind, a.text, i);
        found = c >= limit || ((bits[c >> 3] >> (c & 7)) & 1);
    }
    PyBuffer_Release(&a.table);
    return PyBool_FromLong(found);
}

/* The layout of `fold`'s table (`text._fold_program`): a map of the Basic Multilingual Plane (one
 * uint16 per code point: the character it folds to, 0 for itself, ONLY_OPENCC where only opencc can
 * say), a bitmap of the characters a phrase starts with, then the phrases' first two characters as
 * sorted uint32s (first << 16 | second), all in the machine's byte order. */
#define FOLD_MAP_BYTES (0x10000 * 2)
#define FOLD_STARTS_BYTES (0x10000 / 8)
#define ONLY_OPENCC 0xFFFF

static int
holds_pair(const unsigned char *pairs, Py_ssize_t count, uint32_t key)
{
    Py_ssize_t lo = 0, hi = count;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        uint32_t at;
        memcpy(&at, pairs + mid * 4, 4);
        if (at == key)
            return 1;
        if (at < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* fold(text, table) -> text with each character replaced by the one the table's map gives, or None
 * where the map cannot say: a character it maps to ONLY_OPENCC, one beyond the Basic Multilingual
 * Plane, or a pair of adjacent characters that starts a phrase (`text.fold_chinese` asks opencc then). */
static PyObject *
fold(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    TextAndTable a;
    if (text_and_table("fold", args, nargs, &a) < 0)
        return NULL;
    Py_ssize_t pair_bytes = a.table.len - FOLD_MAP_BYTES - FOLD_STARTS_BYTES;
    if (pair_bytes < 0 || pair_bytes % 4) {
        PyBuffer_Release(&a.table);
        PyErr_SetString(PyExc_ValueError, "fold() takes a table of a map, a bitmap and pairs");
        return NULL;
    }
    const unsigned char *map = a.table.buf;
    const unsigned char *starts = map + FOLD_MAP_BYTES;
    const unsigned char *pairs = starts + FOLD_STARTS_BYTES;
    Py_ssize_t n = a.n;
    Py_UCS2 *out = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_UCS2));
    if (out == NULL) {
        PyBuffer_Release(&a.table);
        return PyErr_NoMemory();
    }
    int folds = 1;
    for (Py_ssize_t i = 0; i < n && folds; i++) {
        Py_UCS4 c = PyUnicode_READ(a.kind, a.text, i);
        uint16_t to = ONLY_OPENCC;
        if (c <= 0xFFFF)
            memcpy(&to, map + c * 2, 2);
        if (to == ONLY_OPENCC) {
            folds = 0;
            break;
        }
        if (to == 0)
            to = (uint16_t)c;
        if (((starts[c >> 3] >> (c & 7)) & 1) && i + 1 < n) {
            Py_UCS4 next = PyUnicode_READ(a.kind, a.text, i + 1);
            folds = !(next <= 0xFFFF && holds_pair(pairs, pair_bytes / 4, (uint32_t)c << 16 | next));
        }
        out[i] = to;
    }
    PyBuffer_Release(&a.table);
    PyObject *result = Py_None;
    if (folds)
        result = PyUnicode_FromKindAndData(PyUnicode_2BYTE_KIND, out, n);
    else
        Py_INCREF(result);
    PyMem_Free(out);
    return result;
}

static PyMethodDef methods[] = {
    {"cut", cut, METH_O, "cut(text) -> (chars, grams, words, identifiers): CJK characters, CJK bigrams, words and the words that are identifiers, space-joined."},
    {"surface", (PyCFunction)(void (*)(void))surface, METH_FASTCALL,
     "surface(text, table) -> the distinct characters of text set in the BMP bitmap table, sorted, space-joined."},
    {"any_set", (PyCFunction)(void (*)(void))any_set, METH_FASTCALL,
     "any_set(text, table) -> whether text holds a character set in the BMP bitmap table or beyond it."},
    {"fold", (PyCFunction)(void (*)(void))fold, METH_FASTCALL,
     "fold(text, table) -> text mapped character by character by the table, or None where it cannot say."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cut", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__cut(void)
{
    return PyModule_Create(&module);
}
