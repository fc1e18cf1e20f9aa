/* The connections diffattn serve holds (conns.c): each has a deadline to have
 * sent its whole request, however slowly its bytes trickle in; a watcher
 * thread shuts the connections past it, so that idle or slow clients cannot
 * hold the server's connections (and threads) for long. */
#ifndef DA_SERVE_CONNS_H
#define DA_SERVE_CONNS_H

#include <microhttpd.h>

#include "diffattn/core.h"

typedef struct srv_conns srv_conns;

/* Starts the watcher: a connection gets request_timeout_s seconds from its
 * accept, and again from the end of each answer, to send a whole request. */
da_status srv_conns_start(srv_conns **out, double request_timeout_s);
/* Stops the watcher; call after MHD_stop_daemon (every connection closed). */
void srv_conns_stop(srv_conns *W);

/* MHD_OPTION_NOTIFY_CONNECTION's callback, with W as its closure. */
void srv_conns_notify(void *W, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);
/* The whole request of c is in: no deadline while it is answered. */
void srv_conns_request_in(srv_conns *W, struct MHD_Connection *c);
/* c's answer is sent: its next request has request_timeout_s seconds. */
void srv_conns_answered(srv_conns *W, struct MHD_Connection *c);

/* How many connections the process's open-file limit leaves room for. */
unsigned srv_conns_limit(void);

#endif
