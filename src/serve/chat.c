/* The chat templates of serve/chat.h: each a loop over the messages that
 * writes what the model's Jinja writes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "diffattn/formats.h"
#include "io/gguf.h"
#include "serve/chat.h"
#include "serve/tojson.h"

srv_template srv_template_detect(const char *jinja) {
    if (!jinja || !jinja[0]) return SRV_TMPL_PLAIN;
    /* Llama 3.1's date is fixed in its template; 3.2's and 3.3's ask strftime_now for today's (not this family) */
    if (strstr(jinja, "<|start_header_id|>") && strstr(jinja, "Cutting Knowledge") && strstr(jinja, "tools_in_user_message") &&
        strstr(jinja, "26 Jul 2024") && !strstr(jinja, "strftime_now"))
        return SRV_TMPL_LLAMA31;
    if (strstr(jinja, "<|start_header_id|>") && strstr(jinja, "<|eot_id|>") && !strstr(jinja, "Cutting Knowledge"))
        return SRV_TMPL_LLAMA3;
    if (strstr(jinja, "<|im_start|>") && strstr(jinja, "<|im_end|>")) return SRV_TMPL_CHATML;
    /* Motif-2's turns; Motif-3's share the turn tokens but open with <|beginoftext|> and a <think> block */
    if (strstr(jinja, "<|startofturn|>") && strstr(jinja, "<|endofturn|>") && !strstr(jinja, "<think>") &&
        !strstr(jinja, "<|beginoftext|>"))
        return SRV_TMPL_MOTIF;
    return SRV_TMPL_PLAIN;
}

const char *srv_template_name(srv_template t) {
    return t == SRV_TMPL_LLAMA3 ? "llama3" : t == SRV_TMPL_LLAMA31 ? "llama3.1" : t == SRV_TMPL_CHATML ? "chatml"
         : t == SRV_TMPL_MOTIF  ? "motif" : "plain";
}

/* The Jinja chat template the model comes with (malloc'ed), or NULL. */
static char *find_chat_template(const char *path) {
    char *out = NULL;
    if (da_gguf_is_gguf(path)) {
        da_gguf_file f;
        memset(&f, 0, sizeof f);
        const char *t = NULL;
        if (!da_gguf_open(&f, path).code && !da_gguf_get_str(&f, "tokenizer.chat_template", &t).code && t &&
            (out = malloc(strlen(t) + 1)))
            strcpy(out, t);
        da_gguf_close(&f);
        return out;
    }
    char cfg[4096];
    struct stat sb;
    if (!stat(path, &sb) && S_ISDIR(sb.st_mode)) snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", path);
    else {
        const char *slash = strrchr(path, '/');
        snprintf(cfg, sizeof cfg, "%.*s%stokenizer_config.json", slash ? (int)(slash - path) : 0, path, slash ? "/" : "");
    }
    FILE *fp = da_fopen_regular(cfg, NULL);
    if (!fp) return NULL;
    char *text = NULL;
    long n = fseek(fp, 0, SEEK_END) ? -1 : ftell(fp);
    if (n > 0 && n < (64L << 20) && !fseek(fp, 0, SEEK_SET) && (text = malloc((size_t)n + 1)) &&
        fread(text, 1, (size_t)n, fp) == (size_t)n) {
        text[n] = 0;
        cJSON *j = cJSON_Parse(text);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
        if (cJSON_IsArray(t)) /* a list of named templates: the default one */
            for (const cJSON *e = t->child; e; e = e->next)
                if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name")) &&
                    !strcmp(cJSON_GetObjectItemCaseSensitive(e, "name")->valuestring, "default"))
                    t = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (cJSON_IsString(t) && (out = malloc(strlen(t->valuestring) + 1))) strcpy(out, t->valuestring);
        cJSON_Delete(j);
    }
    free(text);
    fclose(fp);
    return out;
}

srv_template srv_template_of_model(const char *path, const char **why_plain) {
    char *jinja = find_chat_template(path);
    const srv_template t = srv_template_detect(jinja);
    *why_plain = t != SRV_TMPL_PLAIN ? NULL
               : jinja ? "the model's chat template is not Llama 3's, Llama 3.1's, ChatML's or Motif's"
                       : "the model has no chat template";
    free(jinja);
    return t;
}

const char *srv_template_bos(const da_tokenizer *tok) {
    return tok && da_tokenizer_special_id(tok, "<|begin_of_text|>") >= 0 ? "<|begin_of_text|>" : "";
}

const char *srv_template_turn_end(srv_template t) {
    return t == SRV_TMPL_LLAMA3 || t == SRV_TMPL_LLAMA31 ? "<|eot_id|>" : t == SRV_TMPL_CHATML ? "<|im_end|>"
         : t == SRV_TMPL_MOTIF                            ? "<|endofturn|>" : NULL;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* s[lo, hi) with chars of set taken off the left (l) and right (r) ends: Python's strip / lstrip / rstrip. */
static void strip_range(const char *s, size_t *lo, size_t *hi, int l, int r, int only_newlines) {
    while (l && *lo < *hi && (only_newlines ? s[*lo] == '\n' : is_space(s[*lo]))) (*lo)++;
    while (r && *hi > *lo && (only_newlines ? s[*hi - 1] == '\n' : is_space(s[*hi - 1]))) (*hi)--;
}

/* One message of the Llama 3 templates: its role's header, then its content trimmed. */
static void put_llama3_message(srv_text *b, const srv_message *msg) {
    size_t lo = 0, hi = msg->n_content;
    strip_range(msg->content, &lo, &hi, 1, 1, 0);
    srv_text_put(b, "<|start_header_id|>");
    srv_text_put(b, msg->role);
    srv_text_put(b, "<|end_header_id|>\n\n");
    srv_text_put_n(b, msg->content + lo, hi - lo);
}

/* Meta's Llama 3 template: a header per message, its content trimmed, BOS before the first. */
static void render_llama3(srv_text *b, const srv_message *m, int n, const char *bos) {
    for (int i = 0; i < n; i++) {
        if (i == 0) srv_text_put(b, bos);
        put_llama3_message(b, &m[i]);
        srv_text_put(b, "<|eot_id|>");
    }
    srv_text_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Meta's Llama 3.1 template: a system header with the knowledge and today's dates (the template's default
 * date), tools (when given) inside the first user message, a tool call as {"name", "parameters"} and a tool's
 * answer under the ipython header, its content written by tojson. NULL, or what the template would raise. */
static const char *render_llama31(srv_text *b, const srv_message *m, int n, const srv_tool *tools, int n_tools,
                                  const char *bos) {
    int i = 0;
    size_t lo = 0, hi = 0;
    if (!strcmp(m[0].role, "system")) {
        hi = m[0].n_content;
        strip_range(m[0].content, &lo, &hi, 1, 1, 0);
        i = 1;
    }
    srv_text_put(b, bos);
    srv_text_put(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    if (n_tools) srv_text_put(b, "Environment: ipython\n");
    srv_text_put(b, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
    if (i) srv_text_put_n(b, m[0].content + lo, hi - lo);
    srv_text_put(b, "<|eot_id|>");
    if (n_tools) {
        if (i >= n) return "Cannot put tools in the first user message when there's no first user message!";
        srv_text_put(b, "<|start_header_id|>user<|end_header_id|>\n\n"
               "Given the following functions, please respond with a JSON for a function call with its proper "
               "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
               "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n");
        for (int k = 0; k < n_tools; k++) {
            srv_text_put(b, tools[k].tojson_indent);
            srv_text_put(b, "\n\n");
        }
        lo = 0, hi = m[i].n_content;
        strip_range(m[i].content, &lo, &hi, 1, 1, 0);
        srv_text_put_n(b, m[i].content + lo, hi - lo);
        srv_text_put(b, "<|eot_id|>");
        i++;
    }
    for (; i < n; i++) {
        if (!strcmp(m[i].role, "tool") || !strcmp(m[i].role, "ipython")) {
            srv_text_put(b, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            srv_text_put_json_string(b, m[i].content, m[i].n_content);
        } else if (m[i].n_tool_calls) {
            if (m[i].n_tool_calls != 1) return "This model only supports single tool-calls at once!";
            srv_text_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"");
            srv_text_put(b, m[i].tool_calls[0].name);
            srv_text_put(b, "\", \"parameters\": ");
            srv_text_put(b, m[i].tool_calls[0].arguments_json);
            srv_text_put(b, "}");
        } else {
            put_llama3_message(b, &m[i]);
        }
        srv_text_put(b, "<|eot_id|>");
    }
    srv_text_put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return NULL;
}

static int starts_ends(const char *s, size_t n, const char *pre, const char *suf) {
    const size_t a = strlen(pre), z = strlen(suf);
    return n >= a && n >= z && !memcmp(s, pre, a) && !memcmp(s + n - z, suf, z);
}

/* Finds the last occurrence of needle in s[0..n), or NULL. */
static const char *last_of(const char *s, size_t n, const char *needle) {
    const size_t k = strlen(needle);
    for (size_t i = n >= k ? n - k + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

/* Finds the first occurrence of needle in s[0..n) (which may hold NULs), or NULL. */
static const char *first_of(const char *s, size_t n, const char *needle) {
    const size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

/* An assistant message of Qwen3's template: its reasoning (between <think>
 * and </think>) dropped before the last user query, kept in a think block after it. */
static void render_chatml_assistant(srv_text *b, const srv_message *msg, int after_query, int last) {
    const char *content = msg->content;
    const size_t n = msg->n_content;
    const char *close = first_of(content, n, "</think>");
    size_t c_lo = 0, c_hi = n, r_lo = 0, r_hi = 0;
    const char *rs = content;
    if (close) {
        const char *tail = last_of(content, n, "</think>") + strlen("</think>"); /* split('</think>')[-1] */
        c_lo = (size_t)(tail - content);
        strip_range(content, &c_lo, &c_hi, 1, 0, 1);
        r_hi = (size_t)(close - content); /* split('</think>')[0] */
        strip_range(content, &r_lo, &r_hi, 0, 1, 1);
        const char *open = last_of(content, r_hi, "<think>"); /* .split('<think>')[-1] */
        if (open) r_lo = (size_t)(open - content) + strlen("<think>");
        strip_range(content, &r_lo, &r_hi, 1, 0, 1);
    }
    const int has_content = c_hi > c_lo;
    srv_text_put(b, "<|im_start|>assistant\n");
    if (after_query && (last || r_hi > r_lo)) {
        strip_range(rs, &r_lo, &r_hi, 1, 1, 1);
        srv_text_put(b, "<think>\n");
        srv_text_put_n(b, rs + r_lo, r_hi - r_lo);
        srv_text_put(b, "\n</think>\n\n");
        strip_range(content, &c_lo, &c_hi, 1, 0, 1);
    }
    srv_text_put_n(b, content + c_lo, c_hi - c_lo);
    for (int k = 0; k < msg->n_tool_calls; k++) {
        const srv_tool_call *tc = &msg->tool_calls[k];
        if (k || has_content) srv_text_put(b, "\n");
        srv_text_put(b, "<tool_call>\n{\"name\": \"");
        srv_text_put(b, tc->name);
        srv_text_put(b, "\", \"arguments\": ");
        srv_text_put(b, tc->arguments ? tc->arguments : tc->arguments_json);
        srv_text_put(b, "}\n</tool_call>");
    }
    srv_text_put(b, "<|im_end|>\n");
}

/* Qwen3's ChatML template: system first (the tools' signatures in it when given), tool results as a user turn. */
static void render_chatml(srv_text *b, const srv_message *m, int n, const srv_tool *tools, int n_tools) {
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--)
        if (!strcmp(m[i].role, "user") && !starts_ends(m[i].content, m[i].n_content, "<tool_response>", "</tool_response>")) {
            last_query = i;
            break;
        }
    if (n_tools) {
        srv_text_put(b, "<|im_start|>system\n");
        if (!strcmp(m[0].role, "system")) {
            srv_text_put_n(b, m[0].content, m[0].n_content);
            srv_text_put(b, "\n\n");
        }
        srv_text_put(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
               "with function signatures within <tools></tools> XML tags:\n<tools>");
        for (int k = 0; k < n_tools; k++) {
            srv_text_put(b, "\n");
            srv_text_put(b, tools[k].tojson);
        }
        srv_text_put(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
               "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
               "<args-json-object>}\n</tool_call><|im_end|>\n");
    } else if (!strcmp(m[0].role, "system")) {
        srv_text_put(b, "<|im_start|>system\n");
        srv_text_put_n(b, m[0].content, m[0].n_content);
        srv_text_put(b, "<|im_end|>\n");
    }
    for (int i = 0; i < n; i++) {
        const char *role = m[i].role;
        if (!strcmp(role, "user") || (!strcmp(role, "system") && i > 0)) {
            srv_text_put(b, "<|im_start|>");
            srv_text_put(b, role);
            srv_text_put(b, "\n");
            srv_text_put_n(b, m[i].content, m[i].n_content);
            srv_text_put(b, "<|im_end|>\n");
        } else if (!strcmp(role, "assistant")) {
            render_chatml_assistant(b, &m[i], i > last_query, i == n - 1);
        } else if (!strcmp(role, "tool")) {
            if (i == 0 || strcmp(m[i - 1].role, "tool")) srv_text_put(b, "<|im_start|>user");
            srv_text_put(b, "\n<tool_response>\n");
            srv_text_put_n(b, m[i].content, m[i].n_content);
            srv_text_put(b, "\n</tool_response>");
            if (i == n - 1 || strcmp(m[i + 1].role, "tool")) srv_text_put(b, "<|im_end|>\n");
        }
    }
    srv_text_put(b, "<|im_start|>assistant\n");
}

/* Motif's format as mlx-motif documents it (tools/serveref/motif_chat_template.jinja; docs/motif.md): each
 * message <|startofturn|><|ROLE|>, two newlines, its content as it is, <|endofturn|>; then the assistant's
 * opening. No BOS, and no tool tokens: a tool's answer is one more role. */
static void render_motif(srv_text *b, const srv_message *m, int n) {
    for (int i = 0; i < n; i++) {
        srv_text_put(b, "<|startofturn|><|");
        srv_text_put(b, m[i].role);
        srv_text_put(b, "|>\n\n");
        srv_text_put_n(b, m[i].content, m[i].n_content);
        srv_text_put(b, "<|endofturn|>");
    }
    srv_text_put(b, "<|startofturn|><|assistant|>\n\n");
}

/* The fallback: "role: content" lines, then "assistant:" (docs/serving.md). */
static void render_plain(srv_text *b, const srv_message *m, int n) {
    for (int i = 0; i < n; i++) {
        srv_text_put(b, m[i].role);
        srv_text_put(b, ": ");
        srv_text_put_n(b, m[i].content, m[i].n_content);
        srv_text_put(b, "\n");
    }
    srv_text_put(b, "assistant:");
}

da_status srv_chat_render(srv_template t, const srv_message *m, int n, const srv_tool *tools, int n_tools,
                          const char *bos, char **out, size_t *n_out) {
    *out = NULL;
    *n_out = 0;
    if (n < 1) return da_errorf("messages: the conversation is empty");
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (size_t r = 0; r < sizeof roles / sizeof roles[0]; r++) known |= !strcmp(m[i].role, roles[r]);
        if (!known)
            return da_errorf("messages[%d].role: \"%.40s\" is not one of system, user, assistant, tool, developer", i,
                             m[i].role);
    }
    const int shows_tools = t == SRV_TMPL_LLAMA31 || t == SRV_TMPL_CHATML;
    if (n_tools && !shows_tools)
        return da_errorf("tools: this model's chat template (%s) has no place for tools (Llama 3.1's and Qwen3's do)",
                         srv_template_name(t));
    for (int i = 0; i < n; i++)
        if (m[i].n_tool_calls && !shows_tools)
            return da_errorf("messages[%d].tool_calls: this model's chat template (%s) does not render tool calls", i,
                             srv_template_name(t));
    srv_text b = {0};
    const char *raised = NULL;
    srv_text_put(&b, "");
    if (t == SRV_TMPL_LLAMA3) render_llama3(&b, m, n, bos ? bos : "");
    else if (t == SRV_TMPL_LLAMA31) raised = render_llama31(&b, m, n, tools, n_tools, bos ? bos : "");
    else if (t == SRV_TMPL_CHATML) render_chatml(&b, m, n, tools, n_tools);
    else if (t == SRV_TMPL_MOTIF) render_motif(&b, m, n);
    else render_plain(&b, m, n);
    if (raised) {
        free(b.p);
        return da_errorf("messages: the chat template (%s) refuses this conversation: %s", srv_template_name(t), raised);
    }
    if (b.oom) {
        free(b.p);
        return da_errorf("out of memory rendering the chat");
    }
    *out = b.p;
    *n_out = b.n;
    return da_ok();
}
