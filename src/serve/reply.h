/* Responses (reply.c), for the HTTP plumbing (http.c) and the endpoints (api.c). */
#ifndef DA_SERVE_REPLY_H
#define DA_SERVE_REPLY_H

#include <microhttpd.h>

#include <cjson/cJSON.h>

#include "serve/server.h"

/* Queues text (malloc'ed, freed here) with its content type; counts and logs it. It counts in S->answers
 * until MHD has sent it (or its client left). */
enum MHD_Result srv_send_text(srv *S, struct MHD_Connection *c, unsigned status, const char *type, char *text,
                              const char *method, const char *url);
/* Queues j (freed here) as the response. */
enum MHD_Result srv_send_json(srv *S, struct MHD_Connection *c, unsigned status, cJSON *j, const char *method,
                              const char *url);
/* An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}}. */
enum MHD_Result srv_send_error(srv *S, struct MHD_Connection *c, unsigned status, const char *msg, const char *method,
                               const char *url);

/* One answer fewer in flight (S->answers, under S->mu here). */
void srv_answer_done(srv *S);
/* s[0..n) as a JSON string literal (malloc'ed): NULs and control characters escaped the way cJSON escapes
 * them, other bytes as they are. cJSON prints a string up to its first NUL. */
char *srv_json_quote(const char *s, size_t n);
/* The same as a raw cJSON item, printed as it is. */
cJSON *srv_json_text(const char *s, size_t n);

#endif
