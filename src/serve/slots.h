/* The slot endpoints of diffattn serve (slots.c): GET /slots, and
 * POST /slots/{id}?action=save|restore|erase under --slot-save-path. */
#ifndef DA_SERVE_SLOTS_H
#define DA_SERVE_SLOTS_H

#include <microhttpd.h>

#include "serve/server.h"

/* 1 when url is /slots or /slots/... */
int srv_slots_url(const char *url);
/* GET /slots: every slot's state, as llama-server lists them. */
enum MHD_Result srv_slots_get(srv *S, struct MHD_Connection *c, const char *url);
/* POST /slots/{id}?action=...: body {"filename": NAME} (erase takes none). */
enum MHD_Result srv_slots_post(srv *S, struct MHD_Connection *c, const char *url, const char *body, size_t n);
/* A plain file name: not empty, not "." or "..", at most 255 bytes, no '/', '\\' or control character. NULL when
 * it is one, else why not. */
const char *srv_slot_name_problem(const char *name);

#endif
