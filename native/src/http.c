/* libsmartt: connecting, the HTTP side of the API (Upgrade, control GETs), errors and
 * addresses. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_HEAD 16384
#define MAX_BODY (64u << 20)

const char *smartt_strerror(int code)
{
    static const char *const lib[] = {
        "success", "invalid argument", "out of memory", "cannot connect to the daemon's socket",
        "socket error", "the daemon closed the session", "the daemon sent malformed data",
        "the daemon speaks no protocol version this library does (smartt-msg/1, smartt-msg/2)",
        "the daemon refused the request", "nothing ready yet", "timed out",
        "not supported by this daemon", "the message failed", "the daemon has no session slot free",
        "a system call failed"};
    static const char *const daemon[] = {
        "daemon error", "protocol error (the daemon closed the session)", "not bound",
        "endpoint already bound", "message too large or empty", "too many bytes outstanding",
        "the daemon is shutting down", "received messages were dropped (receive queue full)",
        "the engine refused the message", "bad memfd", "bad destination",
        "the daemon closed the session", "receive ring refused"};
    if (code <= 0 && code > -(int)(sizeof lib / sizeof *lib))
        return lib[-code];
    if (code <= -(SMARTT_EDAEMON_BASE + 1)) {
        int c = SMARTT_DAEMON_CODE(code);
        return c < (int)(sizeof daemon / sizeof *daemon) ? daemon[c] : daemon[0];
    }
    return "unknown error";
}

const char *smartt_default_socket(void)
{
    const char *s = getenv("SMARTT_SOCKET");
    return s && *s ? s : SMARTT_DEFAULT_SOCKET;
}

int smartt_addr_parse(smartt_addr *a, const char *hostport, uint32_t endpoint)
{
    if (!a || !hostport)
        return SMARTT_EINVAL;
    char host[64];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host)
        return SMARTT_EINVAL;
    size_t hl = (size_t)(colon - hostport);
    memcpy(host, hostport, hl);
    host[hl] = 0;
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || port == 0 || port > 65535 || !colon[1])
        return SMARTT_EINVAL;
    memset(a, 0, sizeof *a);
    struct in_addr v4;
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host[hl - 1] = 0;
        if (inet_pton(AF_INET6, host + 1, a->addr) != 1)
            return SMARTT_EINVAL;
    } else if (inet_pton(AF_INET, host, &v4) == 1) {
        a->addr[10] = a->addr[11] = 0xff;
        memcpy(a->addr + 12, &v4, 4);
    } else {
        return SMARTT_EINVAL;
    }
    a->port = (uint16_t)port;
    a->endpoint = endpoint;
    return 0;
}

int smartt_addr_format(const smartt_addr *a, char *buf, size_t len)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char h[INET6_ADDRSTRLEN];
    int v4 = memcmp(a->addr, mapped, 12) == 0;
    if (!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? a->addr + 12 : a->addr, h, sizeof h))
        return SMARTT_EINVAL;
    int n = snprintf(buf, len, v4 ? "%s:%u/%u" : "[%s]:%u/%u", h, a->port, a->endpoint);
    return n < 0 || (size_t)n >= len ? SMARTT_EINVAL : 0;
}

/* sock_connect connects a non-blocking Unix socket. A Unix connect does not complete
 * in the background (EAGAIN means a full backlog), so it blocks, bounded by
 * SO_SNDTIMEO, and the socket turns non-blocking afterwards. */
int sock_connect(const char *path, int timeout_ms)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return SMARTT_EINVAL;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return SMARTT_ESYS;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int r;
    do
        r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    while (r < 0 && errno == EINTR);
    struct timeval none = {0, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    if (r < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        close(fd);
        return SMARTT_ECONNECT;
    }
    return fd;
}

/* write_all writes n bytes to non-blocking fd by deadline dl. */
static int write_all(int fd, const char *p, size_t n, long long dl)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w, n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return SMARTT_EIO;
        struct pollfd pf = {fd, POLLOUT, 0};
        int left = (int)(dl - now_ms());
        if (left <= 0 || poll(&pf, 1, left) == 0)
            return SMARTT_ETIMEDOUT;
    }
    return 0;
}

/* read_some reads into buf by deadline dl: bytes read, 0 at EOF, or an error. */
static ssize_t read_some(int fd, char *buf, size_t n, long long dl)
{
    for (;;) {
        ssize_t r = read(fd, buf, n);
        if (r >= 0)
            return r;
        if (errno != EAGAIN && errno != EINTR)
            return SMARTT_EIO;
        struct pollfd pf = {fd, POLLIN, 0};
        int left = (int)(dl - now_ms());
        if (left <= 0 || poll(&pf, 1, left) == 0)
            return SMARTT_ETIMEDOUT;
    }
}

/* header finds "Name:" in the response head (lines after the status line). */
static int header(const char *head, const char *name, char *val, size_t vlen)
{
    size_t nl = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l; l = strstr(l, "\r\n")) {
        l += 2;
        if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
            const char *v = l + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= vlen)
                n = vlen - 1;
            memcpy(val, v, n);
            val[n] = 0;
            return 1;
        }
    }
    return 0;
}

/* json_error copies the "error" string of a JSON body into errbuf. */
static void json_error(const char *body, char *errbuf, size_t errlen)
{
    if (!errbuf || !errlen)
        return;
    const char *e = strstr(body, "\"error\"");
    const char *q = e ? strchr(e + 7, '"') : NULL;
    size_t n = 0;
    if (q)
        for (q++; q[n] && q[n] != '"' && n + 1 < errlen; n++)
            errbuf[n] = q[n];
    errbuf[n] = 0;
}

static int parse_101(smartt_session *s, const char *head)
{
    char v[128];
    if (!header(head, "Upgrade", v, sizeof v))
        return SMARTT_EPROTO;
    if (strcmp(v, "smartt-msg/2") == 0)
        s->version = 2;
    else if (strcmp(v, "smartt-msg/1") == 0)
        s->version = 1;
    else
        return SMARTT_EVERSION;
    if (header(head, "Smartt-Version", v, sizeof v) && atoi(v) != s->version)
        return SMARTT_EPROTO;
    if (header(head, "Smartt-SendFD", v, sizeof v) && strcmp(v, "1") == 0)
        s->caps |= SMARTT_CAP_SENDFD;
    if (header(head, "Smartt-Lazy-Sent", v, sizeof v) && strcmp(v, "1") == 0)
        s->caps |= SMARTT_CAP_LAZY_SENT;
    if (header(head, "Smartt-Recv-Ring", v, sizeof v) && (s->caps & SMARTT_CAP_SENDFD)) {
        long long m = atoll(v);
        if (m > 0) {
            s->max_ring = (uint64_t)m;
            s->caps |= SMARTT_CAP_RING;
        }
    }
    if (s->version >= 2)
        s->caps |= SMARTT_CAP_CANCEL | SMARTT_CAP_ACCEPTED;
    if (s->version >= 2 && s->want_direct && header(head, "Smartt-Direct", v, sizeof v) &&
        strcmp(v, "1") == 0)
        s->direct = 1, s->caps |= SMARTT_CAP_DIRECT;
    return 0;
}

/* http_upgrade sends the Upgrade request on s->fd and reads the response head; bytes
 * after it are the first frames. 1: the daemon answered 426 (try another version). */
int http_upgrade(smartt_session *s, const char *proto, int timeout_ms, int lazy,
                 char *errbuf, size_t errlen)
{
    long long dl = now_ms() + timeout_ms;
    char req[256];
    int n = snprintf(req, sizeof req,
                     "POST /v1/session HTTP/1.1\r\nHost: smarttd\r\nConnection: Upgrade\r\n"
                     "Upgrade: %s\r\n%s%sContent-Length: 0\r\n\r\n",
                     proto, lazy ? "Smartt-Lazy-Sent: 1\r\n" : "",
                     s->want_direct ? "Smartt-Direct: 1\r\n" : "");
    int r = write_all(s->fd, req, (size_t)n, dl);
    if (r)
        return r;
    char head[MAX_HEAD + 1];
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        if (got == MAX_HEAD)
            return SMARTT_EPROTO;
        ssize_t k = read_some(s->fd, head + got, MAX_HEAD - got, dl);
        if (k <= 0)
            return k == 0 ? SMARTT_ECLOSED : (int)k;
        got += (size_t)k;
        head[got] = 0;
        end = strstr(head, "\r\n\r\n");
    }
    size_t hl = (size_t)(end - head) + 4;
    int status = 0;
    if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
        return SMARTT_EPROTO;
    if (status == 101) {
        end[2] = 0; /* keep the last header's CRLF */
        memcpy(s->in, head + hl, got - hl);
        s->in_len = got - hl;
        return parse_101(s, head);
    }
    json_error(head + hl, errbuf, errlen); /* the body if it came with the head */
    if (status == 426)
        return 1;
    return status == 503 ? SMARTT_EBUSY : SMARTT_EHTTP;
}

/* http_get reads a whole HTTP/1.0 response (the server closes it). */
static int http_get(int fd, const char *path, char **body, long long dl)
{
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: smarttd\r\n\r\n", path);
    if (n < 0 || (size_t)n >= sizeof req)
        return SMARTT_EINVAL;
    int r = write_all(fd, req, (size_t)n, dl);
    if (r)
        return r;
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return SMARTT_ENOMEM;
    for (;;) {
        if (len == cap) {
            char *nb = cap >= MAX_BODY ? NULL : realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                return cap >= MAX_BODY ? SMARTT_EPROTO : SMARTT_ENOMEM;
            }
            buf = nb, cap *= 2;
        }
        ssize_t k = read_some(fd, buf + len, cap - len, dl);
        if (k < 0) {
            free(buf);
            return (int)k;
        }
        if (k == 0)
            break;
        len += (size_t)k;
    }
    buf[len] = 0;
    char *end = strstr(buf, "\r\n\r\n");
    int status = 0;
    if (!end || sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || status < 100) {
        free(buf);
        return SMARTT_EPROTO;
    }
    size_t hl = (size_t)(end - buf) + 4;
    memmove(buf, buf + hl, len - hl + 1);
    *body = buf;
    return status;
}

int smartt_get(const char *socket_path, const char *path, char **body, int timeout_ms)
{
    if (!path || !body || path[0] != '/')
        return SMARTT_EINVAL;
    if (timeout_ms <= 0)
        timeout_ms = 10000;
    int fd = sock_connect(socket_path ? socket_path : smartt_default_socket(), timeout_ms);
    if (fd < 0)
        return fd;
    int r = http_get(fd, path, body, now_ms() + timeout_ms);
    close(fd);
    return r;
}

int smartt_status_json(smartt_session *s, char **body)
{
    return s ? smartt_get(s->socket_path, "/v1/status", body, 0) : SMARTT_EINVAL;
}

int smartt_counters_json(smartt_session *s, char **body)
{
    return s ? smartt_get(s->socket_path, "/v1/counters", body, 0) : SMARTT_EINVAL;
}
