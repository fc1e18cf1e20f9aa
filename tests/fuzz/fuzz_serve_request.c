/* Fuzz target: diffattn serve's request parser (serve/request.c) and the
 * chat templates it feeds (serve/chat.c). The first byte picks the endpoint
 * (its low 2 bits) and the template (the rest, modulo the 5 families); the
 * rest is the JSON body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/chat.h"
#include "serve/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const srv_kind kind = (srv_kind)(data[0] & 3);
    const srv_template tmpl = (srv_template)((data[0] >> 2) % 5);
    srv_request r;
    if (!srv_request_parse(&r, kind, (const char *)data + 1, size - 1).code && r.n_messages) {
        char *text = NULL;
        size_t n = 0, plain = strlen("assistant:"), motif = strlen("<|startofturn|><|assistant|>\n\n");
        for (int i = 0; i < r.n_messages; i++) {
            plain += strlen(r.messages[i].role) + 3 + r.messages[i].n_content;
            motif += strlen("<|startofturn|><||>\n\n<|endofturn|>") + strlen(r.messages[i].role) + r.messages[i].n_content;
        }
        /* the plain and Motif templates keep every byte of every content, NULs included */
        if (!srv_chat_render(tmpl, r.messages, r.n_messages, r.tools, r.n_tools, "<|begin_of_text|>", &text, &n).code &&
            (!text || text[n] || (tmpl == SRV_TMPL_PLAIN && n != plain) || (tmpl == SRV_TMPL_MOTIF && n != motif)))
            abort();
        free(text);
    }
    srv_request_free(&r);
    return 0;
}
