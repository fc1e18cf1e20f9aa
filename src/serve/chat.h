/* Chat templates: a conversation as the text the model was trained on. The
 * model's own template (tokenizer_config.json's chat_template, or GGUF's
 * tokenizer.chat_template) is recognised, not interpreted: Llama 3's, Llama
 * 3.1's, ChatML's (Qwen3's) and Motif's (its format as documented, the template
 * not being found: docs/motif.md) are rendered exactly as their Jinja would;
 * anything else by the plain fallback (docs/serving.md), with a warning in the log. */
#ifndef DA_SERVE_CHAT_H
#define DA_SERVE_CHAT_H

#include "diffattn/core.h"
#include "diffattn/tokenizer.h"
#include "serve/request.h"

typedef enum {
    SRV_TMPL_PLAIN = 0,
    SRV_TMPL_LLAMA3 = 1,
    SRV_TMPL_CHATML = 2,
    SRV_TMPL_LLAMA31 = 3,
    SRV_TMPL_MOTIF = 4
} srv_template;

/* The family of a Jinja chat template (NULL or empty: none, plain). */
srv_template srv_template_detect(const char *jinja);
const char *srv_template_name(srv_template t);

/* The family of the template the model at path comes with: GGUF's
 * tokenizer.chat_template, else chat_template of tokenizer_config.json in a
 * model folder or beside the file. When it is plain, *why_plain says why
 * (no template, or one of no known family) for the caller's warning. */
srv_template srv_template_of_model(const char *path, const char **why_plain);
/* The text of the beginning-of-text token the templates write first ("" when tok, which may be NULL, has none). */
const char *srv_template_bos(const da_tokenizer *tok);
/* The token that closes a turn in the family's format (Llama 3's <|eot_id|>, ChatML's <|im_end|>, Motif's
 * <|endofturn|>); NULL for the plain fallback. */
const char *srv_template_turn_end(srv_template t);

/* The conversation m[0..n) rendered, with the prompt of the assistant's
 * reply at the end; tools[0..n_tools) as the template shows them (refused by
 * templates without tools). bos: the text of the beginning-of-text token
 * (Llama 3 puts it first). *out: malloc'ed, *n_out bytes (NULs of the
 * messages kept) and a terminating NUL. */
da_status srv_chat_render(srv_template t, const srv_message *m, int n, const srv_tool *tools, int n_tools,
                          const char *bos, char **out, size_t *n_out);

#endif
