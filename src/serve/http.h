/* Between the HTTP plumbing (http.c) and the endpoints that make jobs (api.c). */
#ifndef DA_SERVE_HTTP_H
#define DA_SERVE_HTTP_H

#include <microhttpd.h>

#include <cjson/cJSON.h>

#include "serve/server.h"

/* Queues j (freed here) as the response, counts and logs it. */
enum MHD_Result srv_send_json(srv *S, struct MHD_Connection *c, unsigned status, cJSON *j, const char *method,
                              const char *url);
/* An OpenAI-shaped error. */
enum MHD_Result srv_send_error(srv *S, struct MHD_Connection *c, unsigned status, const char *msg, const char *method,
                               const char *url);
/* A POST to one of the JSON endpoints, its whole body read (api.c). */
enum MHD_Result srv_post(srv *S, struct MHD_Connection *c, const char *url, srv_kind k, const char *body, size_t n);

#endif
