/* Chat templates: a conversation as the text the model was trained on. The
 * model's own template (tokenizer_config.json's chat_template, or GGUF's
 * tokenizer.chat_template) is recognised, not interpreted: Llama 3's, Llama
 * 3.1's and ChatML's (Qwen3's) are rendered exactly as their Jinja would; anything else
 * by the plain fallback (docs/serving.md), with a warning in the log. */
#ifndef DA_SERVE_CHAT_H
#define DA_SERVE_CHAT_H

#include "diffattn/core.h"
#include "serve/request.h"

typedef enum { SRV_TMPL_PLAIN = 0, SRV_TMPL_LLAMA3 = 1, SRV_TMPL_CHATML = 2, SRV_TMPL_LLAMA31 = 3 } srv_template;

/* The family of a Jinja chat template (NULL or empty: none, plain). */
srv_template srv_template_detect(const char *jinja);
const char *srv_template_name(srv_template t);

/* The conversation m[0..n) rendered, with the prompt of the assistant's
 * reply at the end; tools[0..n_tools) as the template shows them (refused by
 * templates without tools). bos: the text of the beginning-of-text token
 * (Llama 3 puts it first). *out: malloc'ed, *n_out bytes (NULs of the
 * messages kept) and a terminating NUL. */
da_status srv_chat_render(srv_template t, const srv_message *m, int n, const srv_tool *tools, int n_tools,
                          const char *bos, char **out, size_t *n_out);

#endif
