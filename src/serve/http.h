/* Between the HTTP plumbing (http.c) and the endpoints that make jobs (api.c). */
#ifndef DA_SERVE_HTTP_H
#define DA_SERVE_HTTP_H

#include <microhttpd.h>

#include <cjson/cJSON.h>

#include "serve/server.h"

/* A POST to one of the JSON endpoints, its whole body read (api.c). */
enum MHD_Result srv_post(srv *S, struct MHD_Connection *c, const char *url, srv_kind k, const char *body, size_t n);

#endif
