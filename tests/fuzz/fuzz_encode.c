/* Fuzz target: encoding arbitrary bytes with a fixed small tokenizer whose
 * merges cross the places where chunking could go wrong ("\n\n", "  ",
 * " c" + "af" + "é", " é"). Checks that decode(encode(x)) == x, and that
 * cutting a prefix of x where da_tokenizer_safe_cut says, then encoding the
 * two parts, gives exactly the ids of the whole (what `prepare` relies on);
 * and that the heap merge of long pieces gives the ids of the scan. */
#include "fuzz_util.h"
#include "tok/tokenizer.h"
#include "tok_util.h"

static da_tokenizer *fixed_tokenizer(void) {
    static da_tokenizer *t;
    if (t) return t;
    /* GPT-2 alphabet: \n = U+010A "\xc4\x8a", space = U+0120 "\xc4\xa0", é = C3 A9 = "\xc3\x83\xc2\xa9" */
#define NL "\xc4\x8a"
#define SP "\xc4\xa0"
#define EA "\xc3\x83\xc2\xa9"
    const char *extra = "\"" NL NL "\":256,\"" SP "c\":257,\"aa\":258,\"aaaa\":259,\"" SP "ca\":260,\"" SP
                        "caf\":261,\"" EA "\":262,\"" SP "caf" EA "\":263,\"" SP SP "\":264,\"" SP "\xc3\x83\":265,\"" SP
                        EA "\":266,\"" NL NL NL "\":267";
    const char *merges = "\"" NL " " NL "\",\"" SP " c\",\"a a\",\"aa aa\",\"" SP "c a\",\"" SP "ca f\",\"\xc3\x83 \xc2\xa9\",\""
                         SP "caf " EA "\",\"" SP " " SP "\",\"" SP " \xc3\x83\",\"" SP "\xc3\x83 \xc2\xa9\",\"" NL NL " " NL "\"";
    const char *added = "{\"id\":268,\"content\":\"<|endoftext|>\",\"special\":true}";
#undef NL
#undef SP
#undef EA
    char path[600];
    snprintf(path, sizeof path, "%s/fixed_tokenizer.json", fz_dir());
    if (write_byte_tokenizer(path, added, extra, merges)) abort();
    da_status st = da_tokenizer_load(&t, path);
    unlink(path);
    if (st.code) {
        fprintf(stderr, "fuzz_encode: %s\n", st.msg);
        abort();
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    da_tokenizer *t = fixed_tokenizer();
    int *ids = NULL, *part = NULL;
    size_t n_ids = 0, cap = 0, n_part = 0, part_cap = 0, n_out = 0, out_cap = 0;
    uint8_t *out = NULL;
    if (da_tokenizer_encode(t, data, size, &ids, &n_ids, &cap).code) abort();
    if (da_tokenizer_decode(t, ids, n_ids, &out, &n_out, &out_cap).code) abort();
    if (n_out != size || (size && memcmp(out, data, size))) abort();
    /* every piece through the heap */
    da_tokenizer_set_heap_from(t, 2);
    if (da_tokenizer_encode(t, data, size, &part, &n_part, &part_cap).code) abort();
    da_tokenizer_set_heap_from(t, 257);
    if (n_part != n_ids || (n_ids && memcmp(part, ids, n_ids * sizeof(int)))) {
        fprintf(stderr, "fuzz_encode: the heap merge gives other ids than the scan\n");
        abort();
    }
    n_part = 0;
    /* a chunk of the text ends at k; the rest follows it */
    size_t k = size ? size - (size_t)(data[0] % 64) % size : 0;
    size_t c = da_tokenizer_safe_cut(t, data, k);
    if (c) {
        if (c <= k / 2 || c >= k) abort(); /* the cut lies in the chunk's second half */
        if (da_tokenizer_encode(t, data, c, &part, &n_part, &part_cap).code) abort();
        if (da_tokenizer_encode(t, data + c, size - c, &part, &n_part, &part_cap).code) abort();
        if (n_part != n_ids || (n_ids && memcmp(part, ids, n_ids * sizeof(int)))) {
            fprintf(stderr, "fuzz_encode: cutting at %zu of %zu changes the ids\n", c, size);
            abort();
        }
    }
    free(ids);
    free(part);
    free(out);
    return 0;
}
