/* Deadlines of the connections diffattn serve holds, and the thread that
 * enforces them. libmicrohttpd's own timeout (--timeout) restarts at every
 * byte, so a client sending a header byte every few seconds would hold its
 * connection forever; here the clock runs from the accept (or the end of the
 * previous answer) to the last byte of the request, whatever arrives between. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "serve/conns.h"

typedef struct srv_conn {
    struct srv_conn *prev, *next;
    int fd;
    double deadline; /* CLOCK_MONOTONIC seconds; 0: a request is being answered */
    int shut;        /* the watcher has shut it down; libmicrohttpd closes it */
} srv_conn;

struct srv_conns {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    srv_conn *head;
    double timeout_s;
    int stopping;
};

static double mono_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Every quarter second: a connection past its deadline is shut down (not
 * closed: libmicrohttpd owns the descriptor). Its thread then reads the end of
 * the stream, drops the request and closes the connection. */
static void *watch(void *arg) {
    srv_conns *W = arg;
    pthread_mutex_lock(&W->mu);
    while (!W->stopping) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_nsec += 250000000L;
        if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&W->cv, &W->mu, &t);
        const double now = mono_now();
        for (srv_conn *k = W->head; k; k = k->next)
            if (!k->shut && k->deadline > 0 && now > k->deadline) {
                shutdown(k->fd, SHUT_RDWR);
                k->shut = 1;
            }
    }
    pthread_mutex_unlock(&W->mu);
    return NULL;
}

da_status srv_conns_start(srv_conns **out, double request_timeout_s) {
    *out = NULL;
    srv_conns *W = calloc(1, sizeof *W);
    if (!W) return da_errorf("out of memory");
    W->timeout_s = request_timeout_s;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&W->mu, NULL);
    pthread_cond_init(&W->cv, &ca);
    pthread_condattr_destroy(&ca);
    const int e = pthread_create(&W->thread, NULL, watch, W);
    if (e) {
        pthread_mutex_destroy(&W->mu);
        pthread_cond_destroy(&W->cv);
        free(W);
        return da_errorf("serve: could not start the connection watcher thread (error %d)", e);
    }
    *out = W;
    return da_ok();
}

void srv_conns_stop(srv_conns *W) {
    if (!W) return;
    pthread_mutex_lock(&W->mu);
    W->stopping = 1;
    pthread_cond_signal(&W->cv);
    pthread_mutex_unlock(&W->mu);
    pthread_join(W->thread, NULL);
    while (W->head) { /* none left once the daemon has stopped; freed all the same */
        srv_conn *k = W->head;
        W->head = k->next;
        free(k);
    }
    pthread_mutex_destroy(&W->mu);
    pthread_cond_destroy(&W->cv);
    free(W);
}

/* Called before libmicrohttpd starts the connection's thread and before it
 * closes the descriptor, so the watcher never shuts a descriptor reused by
 * another file. */
void srv_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code) {
    srv_conns *W = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        srv_conn *k = calloc(1, sizeof *k);
        *socket_context = k;
        if (!k || !fd) return; /* untracked: only libmicrohttpd's idle timeout applies */
        k->fd = fd->connect_fd;
        pthread_mutex_lock(&W->mu);
        k->deadline = mono_now() + W->timeout_s;
        k->next = W->head;
        if (W->head) W->head->prev = k;
        W->head = k;
        pthread_mutex_unlock(&W->mu);
        return;
    }
    srv_conn *k = *socket_context;
    if (!k) return;
    pthread_mutex_lock(&W->mu);
    if (k->prev) k->prev->next = k->next;
    else if (W->head == k) W->head = k->next;
    if (k->next) k->next->prev = k->prev;
    pthread_mutex_unlock(&W->mu);
    free(k);
    *socket_context = NULL;
}

static srv_conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

void srv_conns_request_in(srv_conns *W, struct MHD_Connection *c) {
    srv_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&W->mu);
    k->deadline = 0;
    pthread_mutex_unlock(&W->mu);
}

void srv_conns_answered(srv_conns *W, struct MHD_Connection *c) {
    srv_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&W->mu);
    k->deadline = mono_now() + W->timeout_s;
    pthread_mutex_unlock(&W->mu);
}

unsigned srv_conns_limit(void) {
    struct rlimit r;
    /* descriptors kept for the model's files, the listening socket and the watcher */
    const rlim_t spare = 64;
    if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > 1000000) return 1000000;
    return r.rlim_cur > spare + 16 ? (unsigned)(r.rlim_cur - spare) : 16;
}
