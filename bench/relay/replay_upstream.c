/*
 * replay-upstream: a stand-in GPU engine for measuring Maya's upstream relay.
 *
 * It answers Maya's completion requests with streams recorded from real
 * servers (llama-server's, vLLM's or SGLang's wire format), which replay.py
 * prepares into a "script" file. Its whole point is to cost far less per token
 * than the relay it feeds, so the design keeps the per-token path to a memcpy:
 *
 *   - one thread, level-triggered epoll, non-blocking sockets, HTTP/1.1
 *     keep-alive (Maya pools its upstream connections);
 *   - every event is framed as an HTTP chunk once, at start-up, unless it holds
 *     counts that depend on the request (usage, llama-server's per-token
 *     `tokens_predicted`); those few are expanded per send;
 *   - unthrottled (--rate 0), events are batched into 64 KiB writes, as many as
 *     the socket takes; throttled, one timerfd wakes the loop when the earliest
 *     stream is due its next token.
 *
 * The per-token events repeat cyclically up to the request's token limit
 * (`max_tokens`, `n_predict`), then the recorded final events follow with the
 * true counts. A request's prompt tokens are the ids in its `"prompt": [...]`.
 *
 * Script file ("REPLAY 1\n", then records "<tag> <path> <length>\n<bytes>\n"):
 *   S  a complete HTTP response answered to any request for the path
 *      (path "*": the answer to unknown paths)
 *   H  the response head of a streaming path (status line to blank line)
 *   M  the JSON key of the token limit in its request body, quotes included
 *   D  the token limit when the body has none (decimal)
 *   N  the prompt tokens when the prompt is not a list of ids (decimal)
 *   T  one per-token event (SSE bytes); they repeat in order
 *   L  the variant of the preceding T sent when it is the stream's last token
 *      (vLLM and SGLang put the finish reason on the last token's chunk)
 *   F  a final event, sent in order after the last token
 * An event may hold placeholders: byte 0x01 followed by P (prompt tokens),
 * C (completion tokens so far, this one included), T (P + C) or K (P + C - 1,
 * llama-server's tokens_cached).
 *
 * Usage: replay-upstream --script FILE [--host 127.0.0.1] [--port 0] [--rate TOKENS_PER_S]
 * Prints "port N" on stdout once it listens.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROUTES 8
#define MAX_STATICS 16
#define BATCH_BYTES (64 * 1024)     /* one write's worth when unthrottled */
#define MAX_REQUEST (64 << 20)      /* a long agent history's prompt fits with room to spare */
#define PLACEHOLDER 0x01

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

typedef struct {
    char *raw;          /* SSE bytes of the event, maybe with placeholders */
    size_t raw_len;
    char *framed;       /* the whole HTTP chunk when it has no placeholders, else NULL */
    size_t framed_len;
} Event;

typedef struct {
    char path[128];
    char *head;
    size_t head_len;
    char limit_key[48];
    long default_limit, default_prompt;
    Event *tokens, *lasts, *finals;   /* lasts[i].raw == NULL: token i has no last variant */
    size_t ntokens, nfinals, tokens_cap, finals_cap;
} Route;

typedef struct {
    char path[128];
    char *bytes;
    size_t len;
} Static;

typedef struct {
    int fd;
    Buf in, out;
    size_t out_off;
    Route *route;           /* the stream being answered; NULL between requests */
    long limit, sent, prompt;
    int finished;           /* the whole answer is queued in `out` */
    int close_after;
    uint64_t started_ns;
    uint32_t interest;      /* the epoll mask registered now */
    int active_index;       /* its place in `active` (throttled streams), or -1 */
} Conn;

static Route routes[MAX_ROUTES];
static size_t nroutes;
static Static statics[MAX_STATICS];
static size_t nstatics;
static double rate;         /* tokens per second per stream; 0 = as fast as the socket takes them */
static int epfd, listen_fd, timer_fd = -1;
static Conn **conns;        /* by fd */
static size_t conns_cap;
static Conn **active;       /* throttled streams, for the timer */
static size_t nactive, active_cap;
static Buf scratch;         /* one expanded event */

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n);
    if (!p) die("realloc");
    return p;
}

static void buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

static void buf_append(Buf *b, const void *p, size_t n) {
    buf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the script ---------------------------------------------------------- */

static Route *route_for(const char *path, int create) {
    for (size_t i = 0; i < nroutes; i++)
        if (strcmp(routes[i].path, path) == 0) return &routes[i];
    if (!create) return NULL;
    if (nroutes == MAX_ROUTES) {
        fprintf(stderr, "script: too many streaming paths\n");
        exit(1);
    }
    Route *r = &routes[nroutes++];
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    r->default_limit = 16;      /* OpenAI's max_tokens default */
    r->default_prompt = 1;
    return r;
}

static Event make_event(const char *p, size_t n) {
    Event e = {0};
    e.raw = xrealloc(NULL, n + 1);
    memcpy(e.raw, p, n);
    e.raw[n] = 0;
    e.raw_len = n;
    if (!memchr(p, PLACEHOLDER, n)) {
        /* Frame it once here so that sending it is a single memcpy. */
        char size[24];
        int k = snprintf(size, sizeof size, "%zx\r\n", n);
        e.framed_len = (size_t)k + n + 2;
        e.framed = xrealloc(NULL, e.framed_len);
        memcpy(e.framed, size, (size_t)k);
        memcpy(e.framed + k, p, n);
        memcpy(e.framed + k + n, "\r\n", 2);
    }
    return e;
}

static void load_script(const char *file) {
    FILE *f = fopen(file, "rb");
    if (!f) die(file);
    Buf all = {0};
    char block[1 << 16];
    size_t n;
    while ((n = fread(block, 1, sizeof block, f)) > 0) buf_append(&all, block, n);
    fclose(f);
    buf_append(&all, "", 1);

    const char *p = all.data, *end = all.data + all.len - 1;
    if (strncmp(p, "REPLAY 1\n", 9) != 0) {
        fprintf(stderr, "%s: not a replay script\n", file);
        exit(1);
    }
    p += 9;
    while (p < end) {
        char tag, path[128];
        size_t len;
        const char *line_end = memchr(p, '\n', (size_t)(end - p));
        if (!line_end || sscanf(p, "%c %127s %zu", &tag, path, &len) != 3 || line_end + 1 + len + 1 > end) {
            fprintf(stderr, "%s: malformed record at byte %zu\n", file, (size_t)(p - all.data));
            exit(1);
        }
        const char *body = line_end + 1;
        p = body + len + 1;     /* the record's closing newline */
        if (tag == 'S') {
            if (nstatics == MAX_STATICS) {
                fprintf(stderr, "script: too many static answers\n");
                exit(1);
            }
            Static *s = &statics[nstatics++];
            snprintf(s->path, sizeof s->path, "%s", path);
            s->bytes = xrealloc(NULL, len);
            memcpy(s->bytes, body, len);
            s->len = len;
            continue;
        }
        Route *r = route_for(path, 1);
        switch (tag) {
        case 'H':
            r->head = xrealloc(NULL, len);
            memcpy(r->head, body, len);
            r->head_len = len;
            break;
        case 'M':
            snprintf(r->limit_key, sizeof r->limit_key, "%.*s:", (int)len, body);
            break;
        case 'D':
            r->default_limit = strtol(body, NULL, 10);
            break;
        case 'N':
            r->default_prompt = strtol(body, NULL, 10);
            break;
        case 'T':
            if (r->ntokens == r->tokens_cap) {
                r->tokens_cap = r->tokens_cap ? 2 * r->tokens_cap : 256;
                r->tokens = xrealloc(r->tokens, r->tokens_cap * sizeof *r->tokens);
                r->lasts = xrealloc(r->lasts, r->tokens_cap * sizeof *r->lasts);
            }
            r->tokens[r->ntokens] = make_event(body, len);
            memset(&r->lasts[r->ntokens], 0, sizeof *r->lasts);
            r->ntokens++;
            break;
        case 'L':
            if (r->ntokens == 0) {
                fprintf(stderr, "script: L before any T\n");
                exit(1);
            }
            r->lasts[r->ntokens - 1] = make_event(body, len);
            break;
        case 'F':
            if (r->nfinals == r->finals_cap) {
                r->finals_cap = r->finals_cap ? 2 * r->finals_cap : 8;
                r->finals = xrealloc(r->finals, r->finals_cap * sizeof *r->finals);
            }
            r->finals[r->nfinals++] = make_event(body, len);
            break;
        default:
            fprintf(stderr, "script: unknown record %c\n", tag);
            exit(1);
        }
    }
    for (size_t i = 0; i < nroutes; i++)
        if (!routes[i].head || routes[i].ntokens == 0) {
            fprintf(stderr, "script: %s needs a head and token events\n", routes[i].path);
            exit(1);
        }
    free(all.data);
}

/* ---- connections --------------------------------------------------------- */

static void set_interest(Conn *c, uint32_t mask) {
    if (mask == c->interest) return;
    struct epoll_event ev = {.events = mask, .data.fd = c->fd};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) die("epoll_ctl");
    c->interest = mask;
}

static void activate(Conn *c) {
    if (nactive == active_cap) {
        active_cap = active_cap ? 2 * active_cap : 64;
        active = xrealloc(active, active_cap * sizeof *active);
    }
    c->active_index = (int)nactive;
    active[nactive++] = c;
}

static void deactivate(Conn *c) {
    if (c->active_index < 0) return;
    Conn *last = active[--nactive];
    active[c->active_index] = last;
    last->active_index = c->active_index;
    c->active_index = -1;
}

static void close_conn(Conn *c) {
    deactivate(c);
    conns[c->fd] = NULL;
    close(c->fd);
    free(c->in.data);
    free(c->out.data);
    free(c);
}

static void accept_all(void) {
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE) return;   /* try again on the next wake-up */
            die("accept4");
        }
        /* Throttled streams send one small event at a time; Nagle would hold them back. */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if ((size_t)fd >= conns_cap) {
            size_t cap = conns_cap ? conns_cap : 1024;
            while (cap <= (size_t)fd) cap *= 2;
            conns = xrealloc(conns, cap * sizeof *conns);
            memset(conns + conns_cap, 0, (cap - conns_cap) * sizeof *conns);
            conns_cap = cap;
        }
        Conn *c = calloc(1, sizeof *c);
        if (!c) die("calloc");
        c->fd = fd;
        c->active_index = -1;
        c->interest = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
        conns[fd] = c;
    }
}

/* ---- events -------------------------------------------------------------- */

static size_t write_number(char *at, long v) {
    char digits[24];
    size_t n = 0;
    if (v < 0) v = 0;
    do digits[n++] = (char)('0' + v % 10); while ((v /= 10) > 0);
    for (size_t i = 0; i < n; i++) at[i] = digits[n - 1 - i];
    return n;
}

/* Appends one event as an HTTP chunk; `completion` is the count that C stands for. */
static void append_event(Conn *c, const Event *e, long completion) {
    if (e->framed) {
        buf_append(&c->out, e->framed, e->framed_len);
        return;
    }
    scratch.len = 0;
    buf_reserve(&scratch, e->raw_len + 64);
    const char *p = e->raw, *end = e->raw + e->raw_len;
    while (p < end) {
        const char *mark = memchr(p, PLACEHOLDER, (size_t)(end - p));
        if (!mark || mark + 1 >= end) mark = end;
        buf_append(&scratch, p, (size_t)(mark - p));
        if (mark == end) break;
        long v = 0;
        switch (mark[1]) {
        case 'P': v = c->prompt; break;
        case 'C': v = completion; break;
        case 'T': v = c->prompt + completion; break;
        case 'K': v = c->prompt + completion - 1; break;
        }
        buf_reserve(&scratch, 24);
        scratch.len += write_number(scratch.data + scratch.len, v);
        p = mark + 2;
    }
    char size[24];
    int k = snprintf(size, sizeof size, "%zx\r\n", scratch.len);
    buf_append(&c->out, size, (size_t)k);
    buf_append(&c->out, scratch.data, scratch.len);
    buf_append(&c->out, "\r\n", 2);
}

/* Queues the tokens due now (throttled) or a batch's worth (unthrottled), then the finals. */
static void produce(Conn *c, uint64_t now) {
    Route *r = c->route;
    long due = c->limit;
    if (rate > 0) {
        due = (long)((double)(now - c->started_ns) * rate / 1e9) + 1;
        if (due > c->limit) due = c->limit;
    }
    while (c->sent < due && (rate > 0 || c->out.len - c->out_off < BATCH_BYTES)) {
        size_t i = (size_t)(c->sent % (long)r->ntokens);
        const Event *e = (c->sent + 1 == c->limit && r->lasts[i].raw) ? &r->lasts[i] : &r->tokens[i];
        append_event(c, e, c->sent + 1);
        c->sent++;
    }
    if (c->sent == c->limit && !c->finished) {
        for (size_t i = 0; i < r->nfinals; i++) append_event(c, &r->finals[i], c->sent);
        buf_append(&c->out, "0\r\n\r\n", 5);
        c->finished = 1;
    }
}

static void handle_requests(Conn *c);

/* Writes what is queued; returns 0 when the connection was closed. */
static int flush(Conn *c) {
    while (c->out_off < c->out.len) {
        ssize_t n = write(c->fd, c->out.data + c->out_off, c->out.len - c->out_off);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            close_conn(c);  /* the client went away mid-stream, as Maya does on cancel */
            return 0;
        }
        c->out_off += (size_t)n;
    }
    int drained = c->out_off == c->out.len;
    if (drained) c->out.len = c->out_off = 0;
    if (drained && (!c->route || c->finished)) {
        c->route = NULL;
        deactivate(c);
        if (c->close_after) {
            close_conn(c);
            return 0;
        }
        set_interest(c, EPOLLIN);
        int fd = c->fd;
        handle_requests(c);     /* a request may already wait in the buffer */
        return conns[fd] == c;
    }
    if (c->route)   /* unthrottled: come back whenever the socket takes more */
        set_interest(c, EPOLLIN | (rate == 0 || !drained ? EPOLLOUT : 0));
    else
        set_interest(c, EPOLLIN | (drained ? 0 : EPOLLOUT));
    return 1;
}

/* ---- requests ------------------------------------------------------------ */

/* The ids in `"prompt": [...]`, or -1 when the prompt is something else. */
static long count_prompt_ids(const char *body, size_t len) {
    static const char key[] = "\"prompt\":";
    const char *end = body + len, *p = memmem(body, len, key, sizeof key - 1);
    if (!p) return -1;
    p += sizeof key - 1;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    if (p == end || *p != '[') return -1;
    long commas = 0;
    int digits = 0;
    for (p++; p < end && *p != ']'; p++) {
        if (*p == ',') commas++;
        else if (*p >= '0' && *p <= '9') digits = 1;
        else if (*p == '[' || *p == '"' || *p == '{') return -1;   /* a batch or text, not one list of ids */
    }
    return digits ? commas + 1 : 0;
}

static long token_limit(const Route *r, const char *body, size_t len) {
    const char *p = r->limit_key[0] ? memmem(body, len, r->limit_key, strlen(r->limit_key)) : NULL;
    if (!p) return r->default_limit;
    p += strlen(r->limit_key);
    while (p < body + len && *p == ' ') p++;
    char *stop;
    long v = strtol(p, &stop, 10);
    return (stop == p || v <= 0) ? r->default_limit : v;
}

static const Static *static_for(const char *path) {
    const Static *fallback = NULL;
    for (size_t i = 0; i < nstatics; i++) {
        if (strcmp(statics[i].path, path) == 0) return &statics[i];
        if (strcmp(statics[i].path, "*") == 0) fallback = &statics[i];
    }
    return fallback;
}

static void bad_request(Conn *c, const char *why) {
    char answer[256];
    int n = snprintf(answer, sizeof answer,
                     "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", strlen(why), why);
    buf_append(&c->out, answer, (size_t)n);
    c->close_after = 1;
}

static void start_stream(Conn *c, Route *r, const char *body, size_t len) {
    c->route = r;
    c->limit = token_limit(r, body, len);
    c->prompt = count_prompt_ids(body, len);
    if (c->prompt < 0) c->prompt = r->default_prompt;
    c->sent = 0;
    c->finished = 0;
    c->started_ns = now_ns();
    buf_append(&c->out, r->head, r->head_len);
    if (rate > 0) activate(c);
    produce(c, c->started_ns);
}

/* Answers the complete requests in the buffer, stopping at a stream (no pipelining past it). */
static void handle_requests(Conn *c) {
    while (!c->route && !c->close_after) {
        char *head_end = memmem(c->in.data, c->in.len, "\r\n\r\n", 4);
        if (!head_end) {
            if (c->in.len > 65536) bad_request(c, "request head too large");
            break;
        }
        size_t head_len = (size_t)(head_end - c->in.data) + 4;
        size_t body_len = 0;
        int chunked = 0;
        char method[16] = "", path[128] = "", version[16] = "";
        sscanf(c->in.data, "%15s %127s %15s", method, path, version);
        for (char *line = memchr(c->in.data, '\n', head_len); line && line < head_end; line = memchr(line, '\n', (size_t)(head_end - line))) {
            line++;
            if (strncasecmp(line, "content-length:", 15) == 0) body_len = strtoul(line + 15, NULL, 10);
            else if (strncasecmp(line, "transfer-encoding:", 18) == 0) chunked = 1;
            else if (strncasecmp(line, "connection:", 11) == 0) {
                const char *v = line + 11;
                while (*v == ' ') v++;
                if (strncasecmp(v, "close", 5) == 0) c->close_after = 1;
            }
        }
        if (strcmp(version, "HTTP/1.0") == 0) c->close_after = 1;
        if (chunked) {  /* Maya and the bench clients always send a Content-Length */
            bad_request(c, "chunked request bodies are not supported");
            break;
        }
        if (head_len + body_len > MAX_REQUEST) {
            bad_request(c, "request too large");
            break;
        }
        if (c->in.len < head_len + body_len) break;     /* wait for the rest of the body */

        char *query = strchr(path, '?');
        if (query) *query = 0;
        Route *r = strcmp(method, "POST") == 0 ? route_for(path, 0) : NULL;
        if (r) {
            start_stream(c, r, c->in.data + head_len, body_len);
        } else {
            const Static *s = static_for(path);
            if (s) buf_append(&c->out, s->bytes, s->len);
            else bad_request(c, "unknown path");
        }
        size_t used = head_len + body_len;
        memmove(c->in.data, c->in.data + used, c->in.len - used);
        c->in.len -= used;
    }
    if (c->out.len > c->out_off) flush(c);
}

static void on_readable(Conn *c) {
    for (;;) {
        buf_reserve(&c->in, 65536);
        ssize_t n = read(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len);
        if (n > 0) {
            c->in.len += (size_t)n;
            if (c->in.len > MAX_REQUEST + 65536) {
                close_conn(c);
                return;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        close_conn(c);  /* EOF or error: the client is gone */
        return;
    }
    if (!c->route) handle_requests(c);
}

static void on_writable(Conn *c) {
    if (c->route && !c->finished && (rate == 0 || c->out_off == c->out.len)) produce(c, now_ns());
    flush(c);
}

/* ---- the throttle -------------------------------------------------------- */

static void on_timer(void) {
    uint64_t expirations;
    if (read(timer_fd, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("read timerfd");
    uint64_t now = now_ns();
    /* Backwards: a stream that ends is swapped out with the last one, already served. */
    for (size_t i = nactive; i-- > 0;) {
        Conn *c = active[i];
        if (c->finished || c->out_off != c->out.len) continue;     /* a full socket: EPOLLOUT resumes it */
        produce(c, now);
        flush(c);
    }
}

static void arm_timer(void) {
    uint64_t earliest = 0;
    for (size_t i = 0; i < nactive; i++) {
        Conn *c = active[i];
        if (c->finished || c->out_off != c->out.len) continue;
        /* One nanosecond late rather than early: the floor in produce() must see the token due. */
        uint64_t due = c->started_ns + (uint64_t)((double)c->sent * 1e9 / rate) + 1;
        if (!earliest || due < earliest) earliest = due;
    }
    struct itimerspec spec = {0};
    if (earliest) {     /* an absolute time already past fires at once */
        spec.it_value.tv_sec = (time_t)(earliest / 1000000000u);
        spec.it_value.tv_nsec = (long)(earliest % 1000000000u);
        if (!spec.it_value.tv_sec && !spec.it_value.tv_nsec) spec.it_value.tv_nsec = 1;
    }
    if (timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &spec, NULL) < 0) die("timerfd_settime");
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv) {
    const char *script = NULL, *host = "127.0.0.1";
    int port = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--script") == 0) script = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--host") == 0) host = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--port") == 0) port = atoi(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--rate") == 0) rate = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: %s --script FILE [--host H] [--port N] [--rate TOKENS_PER_S]\n", argv[0]);
            return 2;
        }
    }
    if (!script) {
        fprintf(stderr, "%s: --script is required\n", argv[0]);
        return 2;
    }
    if (rate < 0) rate = 0;
    signal(SIGPIPE, SIG_IGN);   /* a client gone mid-write is an EPIPE, not a death */
    load_script(script);

    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd < 0) die("socket");
    int one = 1;
    setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "bad --host %s\n", host);
        return 2;
    }
    if (bind(listen_fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    if (listen(listen_fd, 1024) < 0) die("listen");
    socklen_t addr_len = sizeof addr;
    getsockname(listen_fd, (struct sockaddr *)&addr, &addr_len);

    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = listen_fd};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, listen_fd, &ev) < 0) die("epoll_ctl");
    if (rate > 0) {
        timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (timer_fd < 0) die("timerfd_create");
        ev.data.fd = timer_fd;
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, timer_fd, &ev) < 0) die("epoll_ctl");
    }
    printf("port %d\n", ntohs(addr.sin_port));
    fflush(stdout);

    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(epfd, events, 256, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == listen_fd) {
                accept_all();
                continue;
            }
            if (fd == timer_fd) {
                on_timer();
                continue;
            }
            Conn *c = (size_t)fd < conns_cap ? conns[fd] : NULL;
            if (!c) continue;   /* closed earlier in this batch */
            uint32_t what = events[i].events;
            if (what & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                on_readable(c);
                if (conns[fd] != c) continue;
            }
            if (what & EPOLLOUT) on_writable(c);
        }
        if (rate > 0) arm_timer();
    }
}
