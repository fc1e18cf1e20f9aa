/* Saved slots (docs/serving.md "Saved slots"): a slot's KV cache to a file in
 * --slot-save-path and back, into the same slot or another, in this process or
 * the next. The scheduler owns a slot while it runs a job; an operation holds
 * an idle slot (sl->held, which the scheduler skips) for its duration, so it never
 * races a step, and a slot that is running a job answers 409. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "infer/slot_file.h"
#include "serve/reply.h"
#include "serve/slots.h"

int srv_slots_url(const char *url) { return !strcmp(url, "/slots") || !strncmp(url, "/slots/", 7); }

const char *srv_slot_name_problem(const char *name) {
    const size_t n = strlen(name);
    if (!n) return "is empty";
    if (n > 255) return "is over 255 bytes";
    if (!strcmp(name, ".") || !strcmp(name, "..")) return "names a folder, not a file";
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)name[i];
        if (ch == '/' || ch == '\\') return "holds a path separator; give a plain file name inside --slot-save-path";
        if (ch < 0x20 || ch == 0x7f) return "holds a control character";
    }
    return NULL;
}

static cJSON *slot_json(const srv *S, int i) {
    const srv_slot *sl = &S->slots[i];
    cJSON *o = cJSON_CreateObject(), *next = cJSON_CreateObject();
    const srv_job *j = sl->job;
    cJSON_AddNumberToObject(o, "id", i);
    cJSON_AddNumberToObject(o, "id_task", j ? (double)sl->used : -1);
    cJSON_AddNumberToObject(o, "n_ctx", S->ctx);
    cJSON_AddBoolToObject(o, "speculative", 0);
    cJSON_AddBoolToObject(o, "is_processing", j != NULL || sl->held);
    cJSON_AddNumberToObject(o, "n_cached", sl->n_cached); /* the tokens whose keys and values the slot keeps */
    cJSON_AddNumberToObject(o, "n_prompt_tokens", j ? j->n_ids : 0);
    cJSON_AddBoolToObject(next, "has_next_token", j && !j->done);
    cJSON_AddNumberToObject(next, "n_remain", j ? j->max_new - j->n_out : -1);
    cJSON_AddNumberToObject(next, "n_decoded", j ? j->n_out : 0);
    cJSON_AddItemToObject(o, "next_token", next);
    return o;
}

enum MHD_Result srv_slots_get(srv *S, struct MHD_Connection *c, const char *url) {
    if (strcmp(url, "/slots")) return srv_send_error(S, c, 404, "no such endpoint (GET /slots lists the slots)", "GET", url);
    if (!S->ready) return srv_send_error(S, c, 503, "the model is loading", "GET", url);
    cJSON *a = cJSON_CreateArray();
    pthread_mutex_lock(&S->mu);
    for (int i = 0; i < S->o.parallel; i++) cJSON_AddItemToArray(a, slot_json(S, i));
    pthread_mutex_unlock(&S->mu);
    return srv_send_json(S, c, 200, a, "GET", url);
}

/* 1 when a string literal of body[0..n) holds the escape \u0000 (cJSON would cut the name there). */
static int body_has_nul(const char *b, size_t n) {
    int in = 0;
    for (size_t i = 0; i < n; i++) {
        if (!in) {
            in = b[i] == '"';
            continue;
        }
        if (b[i] == '"') in = 0;
        else if (b[i] == '\\' && i + 1 < n) {
            if (b[i + 1] == 'u' && i + 5 < n && !strncmp(b + i + 2, "0000", 4)) return 1;
            i++;
        }
    }
    return 0;
}

/* The body's "filename" (malloc'ed) in *name, or why not (a 400). */
static da_status body_filename(const char *body, size_t n, char **name) {
    *name = NULL;
    if (body_has_nul(body, n)) return da_errorf("filename: holds a NUL character (\\u0000)");
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, n, &end, 0);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return da_errorf("the body is not a JSON object; send {\"filename\": \"NAME\"}");
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "filename");
    da_status st = da_ok();
    const char *why = cJSON_IsString(f) ? srv_slot_name_problem(f->valuestring) : NULL;
    if (!cJSON_IsString(f)) st = da_errorf("filename: missing or not a string; send {\"filename\": \"NAME\"}");
    else if (why) st = da_errorf("filename \"%.80s\": %s", f->valuestring, why);
    else if (!(*name = malloc(strlen(f->valuestring) + 1))) st = da_errorf("out of memory");
    else strcpy(*name, f->valuestring);
    cJSON_Delete(o);
    return st;
}

/* Takes slot id for an operation (held), or the status why not (msg). A held slot counts as an answer owed
 * (S->answers), so that a server told to stop waits for the operation before it frees the slots. */
static unsigned hold_slot(srv *S, int id, char *msg, size_t cap) {
    unsigned status = 0;
    pthread_mutex_lock(&S->mu);
    srv_slot *sl = &S->slots[id];
    if (S->draining) status = 503, snprintf(msg, cap, "the server is shutting down");
    else if (sl->job || sl->held)
        status = 409, snprintf(msg, cap, "slot %d is %s; try again when it is idle (GET /slots)", id,
                               sl->job ? "processing a request" : "busy with another slot operation");
    else sl->held = 1, S->answers++;
    pthread_mutex_unlock(&S->mu);
    return status;
}

static void release_slot(srv *S, srv_slot *sl) {
    pthread_mutex_lock(&S->mu);
    sl->held = 0;
    pthread_cond_broadcast(&S->work_cv); /* a queued job may take it now */
    pthread_mutex_unlock(&S->mu);
}

static void join_path(const srv *S, const char *name, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", S->o.slot_save_path, name);
}

/* Writes held slot sl's cache to DIR/name; *refused: the name's fault (400), not the write's. */
static da_status save(srv *S, srv_slot *sl, const char *name, size_t *n_bytes, int *n_saved, int *refused) {
    char path[4352];
    join_path(S, name, path, sizeof path);
    struct stat sb;
    /* the rename would replace a symlink, not follow it; a FIFO or device would be written through */
    if (!lstat(path, &sb) && !S_ISREG(sb.st_mode) && (*refused = 1))
        return da_errorf("%s: exists and is not a regular file (a link, folder or device); not replaced", path);
    /* the cache may hold a chunk more than the tokens kept after a failed job */
    pthread_mutex_lock(&S->mu);
    if (da_session_len(sl->s) != sl->n_cached && !da_session_truncate(sl->s, sl->n_cached)) {
        da_session_reset(sl->s);
        sl->n_cached = 0;
    }
    *n_saved = sl->n_cached;
    pthread_mutex_unlock(&S->mu);
    return da_slot_file_write(path, sl->s, sl->cached, sl->n_cached, S->fingerprint, n_bytes);
}

/* Reads DIR/name, a regular file (a symlink is refused), into memory: at most max bytes. *missing: no such file. */
static da_status read_slot_file(const srv *S, const char *name, uint64_t max, uint8_t **data, size_t *n, int *missing) {
    char path[4352];
    join_path(S, name, path, sizeof path);
    *data = NULL, *n = 0, *missing = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        const int e = errno;
        *missing = e == ENOENT;
        if (e == ELOOP) return da_errorf("%s: is a symbolic link; slots are restored only from files in --slot-save-path", path);
        return da_errorf("%s: cannot open: %s", path, strerror(e));
    }
    struct stat sb;
    da_status st = da_ok();
    if (fstat(fd, &sb)) st = da_errorf("%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode)) st = da_errorf("%s: is not a regular file", path);
    else if ((uint64_t)sb.st_size > max)
        st = da_errorf("%s: %lld bytes, more than any slot file of this server's slots holds (%llu)", path,
                       (long long)sb.st_size, (unsigned long long)max);
    else if (!(*data = malloc((size_t)sb.st_size + 1))) st = da_errorf("%s: out of memory", path);
    while (!st.code && *n < (size_t)sb.st_size) {
        const ssize_t got = read(fd, *data + *n, (size_t)sb.st_size - *n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) st = da_errorf("%s: read error: %s", path, strerror(errno));
        if (got <= 0) break;
        *n += (size_t)got;
    }
    close(fd);
    if (st.code) {
        free(*data);
        *data = NULL;
    }
    return st;
}

/* Puts DIR/name's cache into held slot sl. */
static da_status restore(srv *S, srv_slot *sl, const char *name, size_t *n_read, int *n_restored, int *missing) {
    uint8_t *data = NULL;
    size_t n = 0;
    da_status st = read_slot_file(S, name, da_slot_file_max_bytes(sl->s), &data, &n, missing);
    int *tokens = NULL, n_tokens = 0;
    if (!st.code) st = da_slot_file_parse(name, data, n, sl->s, S->fingerprint, &tokens, &n_tokens);
    free(data);
    if (st.code) return st;
    pthread_mutex_lock(&S->mu);
    free(sl->cached);
    sl->cached = tokens;
    sl->n_cached = sl->cap_cached = n_tokens;
    pthread_mutex_unlock(&S->mu);
    *n_read = n;
    *n_restored = n_tokens;
    return da_ok();
}

/* "/slots/{id}": id when it is a slot's, else -1. */
static int slot_id(const char *url, int n_slots) {
    const char *p = url + 7;
    long id = 0;
    if (!*p || strlen(p) > 6) return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        id = id * 10 + (*p - '0');
    }
    return id < n_slots ? (int)id : -1;
}

/* One action on held slot id; the answer. */
static enum MHD_Result act(srv *S, struct MHD_Connection *c, const char *url, int id, const char *action,
                           const char *name) {
    srv_slot *sl = &S->slots[id];
    const double t0 = srv_now();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id_slot", id);
    da_status st = da_ok();
    unsigned fail = 400;
    if (!strcmp(action, "erase")) {
        pthread_mutex_lock(&S->mu);
        cJSON_AddNumberToObject(o, "n_erased", sl->n_cached);
        sl->n_cached = 0;
        da_session_reset(sl->s);
        pthread_mutex_unlock(&S->mu);
    } else {
        size_t n_bytes = 0;
        int n_tokens = 0, missing = 0, refused = 0;
        const int saving = !strcmp(action, "save");
        st = saving ? save(S, sl, name, &n_bytes, &n_tokens, &refused)
                    : restore(S, sl, name, &n_bytes, &n_tokens, &missing);
        if (saving && st.code && !refused) fail = 500;
        if (missing) fail = 404;
        cJSON_AddStringToObject(o, "filename", name);
        cJSON_AddNumberToObject(o, saving ? "n_saved" : "n_restored", n_tokens);
        cJSON_AddNumberToObject(o, saving ? "n_written" : "n_read", (double)n_bytes);
        cJSON *t = cJSON_AddObjectToObject(o, "timings");
        cJSON_AddNumberToObject(t, saving ? "save_ms" : "restore_ms", (srv_now() - t0) * 1e3);
    }
    release_slot(S, sl);
    if (st.code) {
        cJSON_Delete(o);
        if (!S->o.quiet) fprintf(stderr, "serve: slot %d %s: %s\n", id, action, st.msg);
        return srv_send_error(S, c, fail, st.msg, "POST", url);
    }
    return srv_send_json(S, c, 200, o, "POST", url);
}

enum MHD_Result srv_slots_post(srv *S, struct MHD_Connection *c, const char *url, const char *body, size_t n) {
    if (!S->o.slot_save_path || !*S->o.slot_save_path)
        return srv_send_error(S, c, 501, "this server does not save slots; start it with --slot-save-path DIR", "POST", url);
    const int id = strncmp(url, "/slots/", 7) ? -1 : slot_id(url, S->o.parallel);
    char msg[200];
    if (id < 0) {
        snprintf(msg, sizeof msg, "no such slot: POST /slots/{id} with id 0..%d", S->o.parallel - 1);
        return srv_send_error(S, c, 400, msg, "POST", url);
    }
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    if (!action || (strcmp(action, "save") && strcmp(action, "restore") && strcmp(action, "erase")))
        return srv_send_error(S, c, 400, "action: give ?action=save, restore or erase", "POST", url);
    char *name = NULL;
    if (strcmp(action, "erase")) {
        da_status st = body_filename(body, n, &name);
        if (st.code) return srv_send_error(S, c, 400, st.msg, "POST", url);
    }
    const unsigned busy = hold_slot(S, id, msg, sizeof msg);
    enum MHD_Result r = busy ? srv_send_error(S, c, busy, msg, "POST", url) : act(S, c, url, id, action, name);
    if (!busy) srv_answer_done(S);
    free(name);
    return r;
}
