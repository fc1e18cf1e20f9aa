/* Fuzz target: diffattn serve's HTTP layer (serve/http.c, conns.c, reply.c and
 * the endpoints behind them) on libmicrohttpd, fed raw bytes. The input is
 * what a client sends on one connection (a loopback TCP pair handed to the daemon);
 * the harness then half-closes its end and reads until the server closes.
 *
 * The server has no model: its vocabulary is bytes (256 ids, a context of 64),
 * so /tokenize and /detokenize answer, and it is draining, so a completion is
 * parsed, its prompt encoded, then refused with 503 instead of queued.
 * --max-body is 4096 and the API key "k", so that 413 and 401 are reachable.
 *
 * Properties: whatever the server sends begins with an HTTP/1.x status line,
 * and it always ends the connection. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <microhttpd.h>

#include "serve/server.h"

static srv *server(void) {
    static srv *S;
    if (S) return S;
    S = calloc(1, sizeof *S);
    if (!S) abort();
    S->o = da_serve_opts_default();
    S->o.model_path = "fuzz";
    S->o.max_body = 4096;
    S->o.api_key = "k";
    S->o.quiet = 1;
    snprintf(S->model_id, sizeof S->model_id, "fuzz");
    S->V = 256;
    S->ctx = 64;
    S->draining = 1;
    S->ready = 1;
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->work_cv, NULL);
    pthread_cond_init(&S->out_cv, NULL);
    if (srv_http_start_unbound(S).code) abort();
    return S; /* kept for the whole run: the daemon's threads outlive an input */
}

/* Every answer in out begins with a status line: "HTTP/1.x NNN ". */
static int starts_with_status(const char *p, size_t n) {
    return n >= 13 && (!memcmp(p, "HTTP/1.1 ", 9) || !memcmp(p, "HTTP/1.0 ", 9)) && p[9] >= '1' && p[9] <= '5';
}

/* A connected pair of TCP sockets on the loopback: the client's end in *client. */
static int tcp_pair(int *client, struct sockaddr_in *peer) {
    static int listener = -1;
    static struct sockaddr_in at;
    if (listener < 0) {
        listener = socket(AF_INET, SOCK_STREAM, 0);
        memset(&at, 0, sizeof at);
        at.sin_family = AF_INET;
        at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t n = sizeof at;
        if (listener < 0 || bind(listener, (struct sockaddr *)&at, sizeof at) || listen(listener, 16) ||
            getsockname(listener, (struct sockaddr *)&at, &n))
            abort();
    }
    *client = socket(AF_INET, SOCK_STREAM, 0);
    if (*client < 0) abort();
    /* closed with a reset, not left in TIME_WAIT: a minute of those would use up the ports */
    const struct linger reset = {1, 0};
    setsockopt(*client, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    if (connect(*client, (struct sockaddr *)&at, sizeof at)) {
        if (errno != EINTR) abort(); /* libFuzzer's SIGALRM: the connection goes on */
        struct pollfd p = {*client, POLLOUT, 0};
        while (poll(&p, 1, -1) < 0 && errno == EINTR) continue;
    }
    socklen_t n = sizeof *peer;
    int server_end;
    while ((server_end = accept(listener, (struct sockaddr *)peer, &n)) < 0 && errno == EINTR) n = sizeof *peer;
    if (server_end < 0) abort();
    return server_end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    srv *S = server();
    int sv[2];
    struct sockaddr_in peer;
    sv[1] = tcp_pair(&sv[0], &peer);
    if (MHD_add_connection(S->mhd, sv[1], (struct sockaddr *)&peer, sizeof peer) != MHD_YES) abort();
    /* written while answers are read, so that a large input never blocks on a full socket */
    size_t off = 0, n_out = 0, cap = 1 << 16;
    char *out = malloc(cap);
    if (!out) abort();
    int write_open = 1;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct pollfd p = {sv[0], (short)(POLLIN | (write_open ? POLLOUT : 0)), 0};
        const int ready = poll(&p, 1, 1000);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (ready <= 0 && t.tv_sec - t0.tv_sec > 20) {
            fprintf(stderr, "fuzz_serve_http: the server neither answered nor closed in 20 s\n");
            abort();
        }
        if (ready <= 0) continue; /* libFuzzer's SIGALRM interrupts poll (EINTR) */
        if (write_open && (p.revents & POLLOUT)) {
            const ssize_t w = off < size ? send(sv[0], data + off, size - off, MSG_NOSIGNAL) : 0;
            if (w > 0) off += (size_t)w;
            if (w < 0 || off == size) {
                shutdown(sv[0], SHUT_WR);
                write_open = 0;
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            if (n_out == cap && !(out = realloc(out, cap *= 2))) abort();
            const ssize_t r = recv(sv[0], out + n_out, cap - n_out, 0);
            if (r <= 0) break;
            n_out += (size_t)r;
        }
    }
    close(sv[0]);
    /* the daemon frees a connection after its thread ends: wait, so that inputs never pile up threads */
    for (int waited = 0; waited < 100000; waited++) {
        const union MHD_DaemonInfo *i = MHD_get_daemon_info(S->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!i || !i->num_connections) break;
        usleep(50);
    }
    if (n_out && !starts_with_status(out, n_out)) {
        fprintf(stderr, "fuzz_serve_http: the server sent %zu bytes that are not an HTTP answer: %.40s\n", n_out, out);
        abort();
    }
    free(out);
    return 0;
}
