/*
 * nfsop: a scriptable NFSv3 client for eagernfs's end-to-end tests, built on libnfs 4.0.
 *
 * Why it exists: libnfs-utils (nfs-ls, nfs-cp, nfs-cat) open a fresh mount per invocation and
 * cannot send the calls our attack and durability tests need (forged file handles, UNSTABLE
 * writes that expose the write verifier, work that continues across a server restart on the
 * same open file). nfsop keeps ONE libnfs context for its whole life and reads commands from
 * stdin, one per line, answering each with exactly one line on stdout:
 *
 *     ok [result...]
 *     err <ERRNO-NAME | NFS3ERR_* | RPC | USAGE | EMISMATCH> <message>
 *
 * so a test can drive it like a conversation and tell which command failed.
 *
 * Usage:   nfsop 'nfs://127.0.0.1/export/dir?nfsport=P&mountport=P&uid=1000&gid=1000'
 *
 * The first line nfsop prints answers the mount itself: `ok mounted`, or `err MOUNT <message>`
 * followed by exit status 1 (so a test can assert that a mount is refused).
 *
 * Paths are relative to the mounted export and start with '/'. DATA is `hex:0a0b..` or
 * `pat:SEED:LEN`, a deterministic pattern whose byte at absolute file offset X is
 * pattern_byte(SEED, X) (the Rust harness has the same function), so any range written with
 * `pwrite` can be checked with `pverify` or against the file on the server's disk.
 *
 * Commands (ID is the number `open` printed; HEX is a file handle in hex):
 *   mkdir PATH [MODE]        rmdir PATH             unlink PATH
 *   rename FROM TO           link EXISTING NEW      symlink TARGET LINKPATH
 *   readlink PATH            -> ok TARGET
 *   stat PATH | lstat PATH | fstat ID
 *                            -> ok mode=0100644 uid=U gid=G size=N nlink=N ino=N
 *   chmod PATH MODE          chown PATH UID GID     truncate PATH LEN
 *   open PATH FLAGS [MODE]   -> ok ID   FLAGS: r|w|rw followed by any of c(reate) t(runc)
 *                                        x(excl) s(ync) a(ppend); MODE is octal
 *   pwrite ID OFF DATA       -> ok N
 *   pread ID OFF LEN         -> ok HEX  (LEN <= 1 MiB)
 *   pverify ID OFF pat:SEED:LEN -> ok | err EMISMATCH ...
 *   ftruncate ID LEN         fsync ID               close ID
 *   readdir-count PATH       -> ok N          (without . and ..)
 *   readdir PATH             -> ok N name/name/...
 *   fh PATH                  -> ok HEX  walks raw LOOKUPs from the root handle; `..` and
 *                                       symlinks are sent to the server literally
 *   fh-open ID               -> ok HEX
 *   getattr-raw HEX          -> ok type=T mode=0644 uid=U gid=G size=N nlink=N fileid=N
 *   lookup-raw HEX NAME      -> ok HEX fileid=N
 *   readdir-raw HEX          -> ok N name/name/...
 *   read-raw HEX OFF LEN     -> ok eof=E HEX
 *   write-unstable ID OFF DATA      -> ok count=N committed=C verf=HEX16
 *   write-unstable-raw HEX OFF DATA -> same, to any (possibly forged) handle
 *   commit ID                -> ok verf=HEX16
 *   null                     -> ok   (NFSPROC3_NULL; proves the server answers)
 *   echo TEXT                -> ok TEXT
 *
 * Build: cc -O2 -Wall -Wextra -o nfsop nfsop.c $(pkg-config --cflags --libs libnfs)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

/*
 * libnfs 4.0 hands out `struct nfs_fh *` (nfs_get_fh, nfs_get_rootfh) but keeps the layout in
 * a private header. We mirror it here and verify the mirror at start-up (a raw GETATTR of the
 * root handle must report the same fileid as nfs_stat64("/")), so a layout change in another
 * libnfs version fails loudly instead of sending garbage handles.
 */
struct nfs_fh {
    int len;
    char *val;
};
extern struct nfs_fh *nfs_get_rootfh(struct nfs_context *nfs);

#define MAX_OPEN_FILES 256
#define MAX_LINE_BYTES (4 * 1024 * 1024)
#define MAX_DATA_BYTES (16 * 1024 * 1024)
#define MAX_PREAD_BYTES (1024 * 1024)
#define NFS3_FHSIZE_MAX 64
/* Forged handles longer than the protocol allows are still worth sending, within reason. */
#define MAX_RAW_HANDLE_BYTES 128
#define RAW_READDIR_COUNT_BYTES 8192

static struct nfs_context *nfs;
static struct nfsfh *open_files[MAX_OPEN_FILES];
/* How long a raw RPC may take before we give up (the Rust harness bounds us as well). */
static int raw_timeout_ms = 60000;

/* ---- output ---------------------------------------------------------------------------- */

static void reply_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply_err(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void reply_ok(const char *fmt, ...)
{
    va_list ap;
    fputs("ok", stdout);
    if (fmt != NULL && fmt[0] != '\0') {
        fputc(' ', stdout);
        va_start(ap, fmt);
        vfprintf(stdout, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stdout);
    fflush(stdout);
}

/* Messages are flattened to one line so the one-line-per-command contract holds. */
static void reply_err(const char *kind, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++) {
        if (*p == '\n' || *p == '\r') {
            *p = ' ';
        }
    }
    printf("err %s %s\n", kind, msg);
    fflush(stdout);
}

static const char *errno_name(int e)
{
    switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EIO: return "EIO";
    case ENXIO: return "ENXIO";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case ENODEV: return "ENODEV";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case EROFS: return "EROFS";
    case EMLINK: return "EMLINK";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ELOOP: return "ELOOP";
    case EDQUOT: return "EDQUOT";
    case ESTALE: return "ESTALE";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ENOTSUP: return "ENOTSUP";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    default: return NULL;
    }
}

/* libnfs sync calls return -errno; nfs_get_error() carries the server's nfsstat3 text. */
static void reply_errno(int rc)
{
    int e = rc < 0 ? -rc : rc;
    const char *name = errno_name(e);
    char buf[32];
    if (name == NULL) {
        snprintf(buf, sizeof(buf), "E%d", e);
        name = buf;
    }
    const char *msg = nfs_get_error(nfs);
    reply_err(name, "%s", msg ? msg : strerror(e));
}

static void print_hex(FILE *out, const unsigned char *data, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        fputc(digits[data[i] >> 4], out);
        fputc(digits[data[i] & 15], out);
    }
}

/* ---- argument parsing ------------------------------------------------------------------ */

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (s == NULL || *s == '\0' || *s == '-') {
        return -1;
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0') {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_mode(const char *s, int *out)
{
    char *end;
    if (s == NULL || *s == '\0') {
        return -1;
    }
    long v = strtol(s, &end, 8);
    if (*end != '\0' || v < 0 || v > 07777) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes an even-length hex string into a fresh buffer of at most `max` bytes. */
static int parse_hex(const char *s, size_t max, unsigned char **out, size_t *out_len)
{
    size_t n = strlen(s);
    if (n % 2 != 0 || n / 2 > max) {
        return -1;
    }
    unsigned char *buf = malloc(n / 2 + 1);
    if (buf == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_value(s[2 * i]);
        int lo = hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(buf);
            return -1;
        }
        buf[i] = (unsigned char)(hi << 4 | lo);
    }
    *out = buf;
    *out_len = n / 2;
    return 0;
}

/* A 64-bit mix of (seed, absolute offset): catches data written at the wrong offset, which a
 * repeating pattern would not. Must match `pattern_byte` in crates/cli/tests/common/mod.rs. */
static unsigned char pattern_byte(uint64_t seed, uint64_t offset)
{
    uint64_t h = offset + seed * 0x9E3779B97F4A7C15ull;
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 31;
    return (unsigned char)h;
}

struct pattern {
    uint64_t seed;
    uint64_t len;
};

static int parse_pattern(const char *s, struct pattern *p)
{
    char copy[128];
    if (strncmp(s, "pat:", 4) != 0 || strlen(s) >= sizeof(copy)) {
        return -1;
    }
    strcpy(copy, s + 4);
    char *colon = strchr(copy, ':');
    if (colon == NULL) {
        return -1;
    }
    *colon = '\0';
    if (parse_u64(copy, &p->seed) != 0 || parse_u64(colon + 1, &p->len) != 0) {
        return -1;
    }
    return 0;
}

/* DATA for a write at `offset`: hex bytes, or the pattern's bytes for that file range. */
static int parse_data(const char *s, uint64_t offset, unsigned char **out, size_t *out_len)
{
    if (strncmp(s, "hex:", 4) == 0) {
        return parse_hex(s + 4, MAX_DATA_BYTES, out, out_len);
    }
    struct pattern p;
    if (parse_pattern(s, &p) != 0 || p.len > MAX_DATA_BYTES) {
        return -1;
    }
    unsigned char *buf = malloc(p.len + 1);
    if (buf == NULL) {
        return -1;
    }
    for (uint64_t i = 0; i < p.len; i++) {
        buf[i] = pattern_byte(p.seed, offset + i);
    }
    *out = buf;
    *out_len = p.len;
    return 0;
}

static int parse_open_flags(const char *s, int *flags)
{
    int f;
    if (strncmp(s, "rw", 2) == 0) {
        f = O_RDWR;
        s += 2;
    } else if (s[0] == 'r') {
        f = O_RDONLY;
        s += 1;
    } else if (s[0] == 'w') {
        f = O_WRONLY;
        s += 1;
    } else {
        return -1;
    }
    for (; *s; s++) {
        switch (*s) {
        case 'c': f |= O_CREAT; break;
        case 't': f |= O_TRUNC; break;
        case 'x': f |= O_EXCL; break;
        case 's': f |= O_SYNC; break;
        case 'a': f |= O_APPEND; break;
        default: return -1;
        }
    }
    *flags = f;
    return 0;
}

static struct nfsfh *file_by_id(const char *s)
{
    uint64_t id;
    if (parse_u64(s, &id) != 0 || id == 0 || id >= MAX_OPEN_FILES) {
        return NULL;
    }
    return open_files[id];
}

/* ---- raw RPCs ---------------------------------------------------------------------------- */

/*
 * libnfs's raw calls are asynchronous; this drives the context's event loop until the callback
 * has run. The callback's `data` is only valid inside the callback, so each caller copies what
 * it needs out of it there.
 */
struct raw_call {
    int done;
    int rpc_status;           /* RPC_STATUS_* */
    char rpc_error[256];      /* for RPC_STATUS_ERROR */
    int nfs_status;           /* nfsstat3 from the reply */
    void (*extract)(struct raw_call *call, void *data);
    /* Results, filled by `extract`. */
    unsigned char fh[MAX_RAW_HANDLE_BYTES];
    size_t fh_len;
    int have_attr;
    fattr3 attr;
    unsigned char verf[NFS3_WRITEVERFSIZE];
    uint32_t count;
    int committed;
    int eof;
    unsigned char *data;
    size_t data_len;
    /* READDIR paging state and collected names. */
    uint64_t cookie;
    char cookieverf[NFS3_COOKIEVERFSIZE];
    char *names;
    size_t names_len;
    size_t names_cap;
    uint64_t entries;
};

static void raw_cb(struct rpc_context *rpc, int status, void *data, void *private_data)
{
    (void)rpc;
    struct raw_call *call = private_data;
    call->rpc_status = status;
    if (status == RPC_STATUS_SUCCESS) {
        /* Every NFSv3 result union starts with its nfsstat3; NULL's void reply has no data. */
        call->nfs_status = data != NULL ? *(int *)data : NFS3_OK;
        if (call->nfs_status == NFS3_OK && call->extract != NULL) {
            call->extract(call, data);
        }
    } else if (status == RPC_STATUS_ERROR && data != NULL) {
        snprintf(call->rpc_error, sizeof(call->rpc_error), "%s", (const char *)data);
    }
    call->done = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Returns 0 when the callback ran (check rpc_status), -1 on timeout or a dead connection. */
static int raw_wait(struct raw_call *call)
{
    int64_t deadline = now_ms() + raw_timeout_ms;
    while (!call->done) {
        struct pollfd pfd = {.fd = nfs_get_fd(nfs), .events = nfs_which_events(nfs)};
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            snprintf(call->rpc_error, sizeof(call->rpc_error), "no reply within %d ms", raw_timeout_ms);
            return -1;
        }
        int n = poll(&pfd, 1, left < 100 ? (int)left : 100);
        if (n < 0 && errno != EINTR) {
            snprintf(call->rpc_error, sizeof(call->rpc_error), "poll: %s", strerror(errno));
            return -1;
        }
        if (nfs_service(nfs, n > 0 ? pfd.revents : 0) < 0) {
            snprintf(call->rpc_error, sizeof(call->rpc_error), "nfs_service: %s", nfs_get_error(nfs));
            return -1;
        }
    }
    return 0;
}

/* Prints the `err` line for a failed raw call; returns 1 if it did. */
static int raw_failed(struct raw_call *call, int queued, int waited)
{
    if (queued != 0) {
        reply_err("RPC", "could not queue the call: %s", nfs_get_error(nfs));
        return 1;
    }
    if (waited != 0) {
        reply_err("RPC", "%s", call->rpc_error);
        return 1;
    }
    if (call->rpc_status != RPC_STATUS_SUCCESS) {
        reply_err("RPC", "rpc status %d: %s", call->rpc_status, call->rpc_error);
        return 1;
    }
    if (call->nfs_status != NFS3_OK) {
        reply_err(nfsstat3_to_str(call->nfs_status), "server returned nfsstat3 %d", call->nfs_status);
        return 1;
    }
    return 0;
}

static void copy_fh(struct raw_call *call, const nfs_fh3 *fh)
{
    call->fh_len = fh->data.data_len < sizeof(call->fh) ? fh->data.data_len : sizeof(call->fh);
    memcpy(call->fh, fh->data.data_val, call->fh_len);
}

static void extract_getattr(struct raw_call *call, void *data)
{
    GETATTR3res *res = data;
    call->have_attr = 1;
    call->attr = res->GETATTR3res_u.resok.obj_attributes;
}

static void extract_lookup(struct raw_call *call, void *data)
{
    LOOKUP3res *res = data;
    copy_fh(call, &res->LOOKUP3res_u.resok.object);
    if (res->LOOKUP3res_u.resok.obj_attributes.attributes_follow) {
        call->have_attr = 1;
        call->attr = res->LOOKUP3res_u.resok.obj_attributes.post_op_attr_u.attributes;
    }
}

static void extract_write(struct raw_call *call, void *data)
{
    WRITE3res *res = data;
    call->count = res->WRITE3res_u.resok.count;
    call->committed = res->WRITE3res_u.resok.committed;
    memcpy(call->verf, res->WRITE3res_u.resok.verf, NFS3_WRITEVERFSIZE);
}

static void extract_commit(struct raw_call *call, void *data)
{
    COMMIT3res *res = data;
    memcpy(call->verf, res->COMMIT3res_u.resok.verf, NFS3_WRITEVERFSIZE);
}

static void extract_read(struct raw_call *call, void *data)
{
    READ3res *res = data;
    size_t n = res->READ3res_u.resok.data.data_len;
    call->eof = res->READ3res_u.resok.eof;
    call->data = malloc(n + 1);
    if (call->data != NULL) {
        memcpy(call->data, res->READ3res_u.resok.data.data_val, n);
        call->data_len = n;
    }
}

static void append_name(struct raw_call *call, const char *name)
{
    size_t n = strlen(name);
    if (call->names_len + n + 2 > call->names_cap) {
        size_t cap = (call->names_cap + n + 2) * 2;
        char *grown = realloc(call->names, cap);
        if (grown == NULL) {
            return;
        }
        call->names = grown;
        call->names_cap = cap;
    }
    if (call->names_len > 0) {
        call->names[call->names_len++] = '/';
    }
    memcpy(call->names + call->names_len, name, n);
    call->names_len += n;
    call->names[call->names_len] = '\0';
}

static void extract_readdir(struct raw_call *call, void *data)
{
    READDIR3res *res = data;
    READDIR3resok *ok = &res->READDIR3res_u.resok;
    for (entry3 *e = ok->reply.entries; e != NULL; e = e->nextentry) {
        call->cookie = e->cookie;
        if (strcmp(e->name, ".") == 0 || strcmp(e->name, "..") == 0) {
            continue;
        }
        call->entries++;
        append_name(call, e->name);
    }
    memcpy(call->cookieverf, ok->cookieverf, NFS3_COOKIEVERFSIZE);
    call->eof = ok->reply.eof;
}

static struct rpc_context *rpc(void)
{
    return nfs_get_rpc_context(nfs);
}

static void set_fh3(nfs_fh3 *out, const unsigned char *fh, size_t len)
{
    out->data.data_len = (u_int)len;
    out->data.data_val = (char *)fh;
}

/* Each raw_* helper returns 0 and fills `call` on NFS3_OK, or prints the err line and
 * returns -1. */
static int raw_getattr(const unsigned char *fh, size_t len, struct raw_call *call)
{
    GETATTR3args args;
    memset(call, 0, sizeof(*call));
    call->extract = extract_getattr;
    set_fh3(&args.object, fh, len);
    int q = rpc_nfs3_getattr_async(rpc(), raw_cb, &args, call);
    int w = q == 0 ? raw_wait(call) : 0;
    return raw_failed(call, q, w) ? -1 : 0;
}

static int raw_lookup(const unsigned char *fh, size_t len, const char *name, struct raw_call *call)
{
    LOOKUP3args args;
    memset(call, 0, sizeof(*call));
    call->extract = extract_lookup;
    set_fh3(&args.what.dir, fh, len);
    args.what.name = (char *)name;
    int q = rpc_nfs3_lookup_async(rpc(), raw_cb, &args, call);
    int w = q == 0 ? raw_wait(call) : 0;
    return raw_failed(call, q, w) ? -1 : 0;
}

static int raw_write(const unsigned char *fh, size_t len, uint64_t offset, unsigned char *data,
                     size_t data_len, struct raw_call *call)
{
    WRITE3args args;
    memset(call, 0, sizeof(*call));
    call->extract = extract_write;
    set_fh3(&args.file, fh, len);
    args.offset = offset;
    args.count = (count3)data_len;
    args.stable = UNSTABLE;
    args.data.data_len = (u_int)data_len;
    args.data.data_val = (char *)data;
    int q = rpc_nfs3_write_async(rpc(), raw_cb, &args, call);
    int w = q == 0 ? raw_wait(call) : 0;
    return raw_failed(call, q, w) ? -1 : 0;
}

static int raw_commit(const unsigned char *fh, size_t len, struct raw_call *call)
{
    COMMIT3args args;
    memset(call, 0, sizeof(*call));
    call->extract = extract_commit;
    set_fh3(&args.file, fh, len);
    args.offset = 0;
    args.count = 0; /* 0 = commit everything from offset to end of file */
    int q = rpc_nfs3_commit_async(rpc(), raw_cb, &args, call);
    int w = q == 0 ? raw_wait(call) : 0;
    return raw_failed(call, q, w) ? -1 : 0;
}

static int raw_read(const unsigned char *fh, size_t len, uint64_t offset, uint32_t count,
                    struct raw_call *call)
{
    READ3args args;
    memset(call, 0, sizeof(*call));
    call->extract = extract_read;
    set_fh3(&args.file, fh, len);
    args.offset = offset;
    args.count = count;
    int q = rpc_nfs3_read_async(rpc(), raw_cb, &args, call);
    int w = q == 0 ? raw_wait(call) : 0;
    return raw_failed(call, q, w) ? -1 : 0;
}

/* Pages through READDIR until eof; a bounded number of pages guards against a server that
 * never sets eof. */
static int raw_readdir(const unsigned char *fh, size_t len, struct raw_call *call)
{
    memset(call, 0, sizeof(*call));
    for (int page = 0; page < 1000000; page++) {
        READDIR3args args;
        set_fh3(&args.dir, fh, len);
        args.cookie = call->cookie;
        memcpy(args.cookieverf, call->cookieverf, NFS3_COOKIEVERFSIZE);
        args.count = RAW_READDIR_COUNT_BYTES;
        call->done = 0;
        call->extract = extract_readdir;
        int q = rpc_nfs3_readdir_async(rpc(), raw_cb, &args, call);
        int w = q == 0 ? raw_wait(call) : 0;
        if (raw_failed(call, q, w)) {
            return -1;
        }
        if (call->eof) {
            return 0;
        }
    }
    reply_err("RPC", "READDIR never reached eof");
    return -1;
}

static void print_fattr(const fattr3 *a)
{
    printf("type=%d mode=0%o uid=%u gid=%u size=%" PRIu64 " nlink=%u fileid=%" PRIu64, (int)a->type,
           (unsigned)a->mode, (unsigned)a->uid, (unsigned)a->gid, (uint64_t)a->size, (unsigned)a->nlink,
           (uint64_t)a->fileid);
}

/* ---- commands --------------------------------------------------------------------------- */

#define MAX_ARGS 8

struct command {
    const char *name;
    int min_args;
    int max_args;
    const char *usage;
    void (*run)(char **argv, int argc);
};

static void cmd_mkdir(char **argv, int argc)
{
    int mode = 0755;
    if (argc > 1 && parse_mode(argv[1], &mode) != 0) {
        reply_err("USAGE", "bad mode %s", argv[1]);
        return;
    }
    int rc = nfs_mkdir2(nfs, argv[0], mode);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_rmdir(char **argv, int argc)
{
    (void)argc;
    int rc = nfs_rmdir(nfs, argv[0]);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_unlink(char **argv, int argc)
{
    (void)argc;
    int rc = nfs_unlink(nfs, argv[0]);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_rename(char **argv, int argc)
{
    (void)argc;
    int rc = nfs_rename(nfs, argv[0], argv[1]);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_link(char **argv, int argc)
{
    (void)argc;
    int rc = nfs_link(nfs, argv[0], argv[1]);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_symlink(char **argv, int argc)
{
    (void)argc;
    int rc = nfs_symlink(nfs, argv[0], argv[1]);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_readlink(char **argv, int argc)
{
    (void)argc;
    char *target = NULL;
    int rc = nfs_readlink2(nfs, argv[0], &target);
    if (rc < 0) {
        reply_errno(rc);
        return;
    }
    reply_ok("%s", target);
    free(target);
}

static void reply_stat(const struct nfs_stat_64 *st)
{
    reply_ok("mode=0%" PRIo64 " uid=%" PRIu64 " gid=%" PRIu64 " size=%" PRIu64 " nlink=%" PRIu64
             " ino=%" PRIu64,
             st->nfs_mode, st->nfs_uid, st->nfs_gid, st->nfs_size, st->nfs_nlink, st->nfs_ino);
}

static void cmd_stat(char **argv, int argc)
{
    (void)argc;
    struct nfs_stat_64 st;
    int rc = nfs_stat64(nfs, argv[0], &st);
    rc < 0 ? reply_errno(rc) : reply_stat(&st);
}

static void cmd_lstat(char **argv, int argc)
{
    (void)argc;
    struct nfs_stat_64 st;
    int rc = nfs_lstat64(nfs, argv[0], &st);
    rc < 0 ? reply_errno(rc) : reply_stat(&st);
}

static void cmd_chmod(char **argv, int argc)
{
    (void)argc;
    int mode;
    if (parse_mode(argv[1], &mode) != 0) {
        reply_err("USAGE", "bad mode %s", argv[1]);
        return;
    }
    int rc = nfs_chmod(nfs, argv[0], mode);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_chown(char **argv, int argc)
{
    (void)argc;
    uint64_t uid, gid;
    if (parse_u64(argv[1], &uid) != 0 || parse_u64(argv[2], &gid) != 0) {
        reply_err("USAGE", "bad uid/gid");
        return;
    }
    int rc = nfs_chown(nfs, argv[0], (int)uid, (int)gid);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_truncate(char **argv, int argc)
{
    (void)argc;
    uint64_t len;
    if (parse_u64(argv[1], &len) != 0) {
        reply_err("USAGE", "bad length");
        return;
    }
    int rc = nfs_truncate(nfs, argv[0], len);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_open(char **argv, int argc)
{
    int flags, mode = 0644;
    if (parse_open_flags(argv[1], &flags) != 0) {
        reply_err("USAGE", "bad flags %s", argv[1]);
        return;
    }
    if (argc > 2 && parse_mode(argv[2], &mode) != 0) {
        reply_err("USAGE", "bad mode %s", argv[2]);
        return;
    }
    int id = 1;
    while (id < MAX_OPEN_FILES && open_files[id] != NULL) {
        id++;
    }
    if (id == MAX_OPEN_FILES) {
        reply_err("EMFILE", "more than %d open files", MAX_OPEN_FILES - 1);
        return;
    }
    struct nfsfh *fh = NULL;
    int rc;
    if (flags & O_CREAT) {
        rc = nfs_create(nfs, argv[0], flags, mode, &fh);
    } else {
        rc = nfs_open(nfs, argv[0], flags, &fh);
    }
    if (rc < 0) {
        reply_errno(rc);
        return;
    }
    open_files[id] = fh;
    reply_ok("%d", id);
}

static void cmd_pwrite(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    uint64_t offset;
    unsigned char *data;
    size_t len;
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    if (parse_u64(argv[1], &offset) != 0 || parse_data(argv[2], offset, &data, &len) != 0) {
        reply_err("USAGE", "bad offset or data");
        return;
    }
    int rc = nfs_pwrite(nfs, fh, offset, len, data);
    free(data);
    rc < 0 ? reply_errno(rc) : reply_ok("%d", rc);
}

/* Reads up to `len` bytes, looping because a read may legally return fewer bytes. */
static int64_t read_fully(struct nfsfh *fh, uint64_t offset, uint64_t len, unsigned char *buf)
{
    uint64_t got = 0;
    while (got < len) {
        int rc = nfs_pread(nfs, fh, offset + got, len - got, buf + got);
        if (rc < 0) {
            return rc;
        }
        if (rc == 0) {
            break; /* end of file */
        }
        got += (uint64_t)rc;
    }
    return (int64_t)got;
}

static void cmd_pread(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    uint64_t offset, len;
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    if (parse_u64(argv[1], &offset) != 0 || parse_u64(argv[2], &len) != 0 || len > MAX_PREAD_BYTES) {
        reply_err("USAGE", "bad offset or length (max %d)", MAX_PREAD_BYTES);
        return;
    }
    unsigned char *buf = malloc(len + 1);
    if (buf == NULL) {
        reply_err("ENOMEM", "cannot allocate %" PRIu64 " bytes", len);
        return;
    }
    int64_t got = read_fully(fh, offset, len, buf);
    if (got < 0) {
        reply_errno((int)got);
    } else {
        fputs("ok ", stdout);
        print_hex(stdout, buf, (size_t)got);
        fputc('\n', stdout);
        fflush(stdout);
    }
    free(buf);
}

static void cmd_pverify(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    uint64_t offset;
    struct pattern p;
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    if (parse_u64(argv[1], &offset) != 0 || parse_pattern(argv[2], &p) != 0) {
        reply_err("USAGE", "bad offset or pattern");
        return;
    }
    enum { CHUNK = 1024 * 1024 };
    unsigned char *buf = malloc(CHUNK);
    if (buf == NULL) {
        reply_err("ENOMEM", "cannot allocate");
        return;
    }
    for (uint64_t done = 0; done < p.len;) {
        uint64_t want = p.len - done < CHUNK ? p.len - done : CHUNK;
        int64_t got = read_fully(fh, offset + done, want, buf);
        if (got < 0) {
            reply_errno((int)got);
            free(buf);
            return;
        }
        for (int64_t i = 0; i < got; i++) {
            unsigned char expect = pattern_byte(p.seed, offset + done + (uint64_t)i);
            if (buf[i] != expect) {
                reply_err("EMISMATCH", "offset=%" PRIu64 " got=%02x want=%02x", offset + done + (uint64_t)i,
                          buf[i], expect);
                free(buf);
                return;
            }
        }
        if ((uint64_t)got < want) {
            reply_err("EMISMATCH", "short file: read ends at %" PRIu64 ", pattern at %" PRIu64,
                      offset + done + (uint64_t)got, offset + p.len);
            free(buf);
            return;
        }
        done += want;
    }
    free(buf);
    reply_ok(NULL);
}

static void cmd_fstat(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    struct nfs_stat_64 st;
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    int rc = nfs_fstat64(nfs, fh, &st);
    rc < 0 ? reply_errno(rc) : reply_stat(&st);
}

static void cmd_ftruncate(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    uint64_t len;
    if (fh == NULL || parse_u64(argv[1], &len) != 0) {
        reply_err("USAGE", "bad file id or length");
        return;
    }
    int rc = nfs_ftruncate(nfs, fh, len);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_fsync(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    int rc = nfs_fsync(nfs, fh);
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void cmd_close(char **argv, int argc)
{
    (void)argc;
    uint64_t id;
    if (parse_u64(argv[0], &id) != 0 || id == 0 || id >= MAX_OPEN_FILES || open_files[id] == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    int rc = nfs_close(nfs, open_files[id]);
    open_files[id] = NULL;
    rc < 0 ? reply_errno(rc) : reply_ok(NULL);
}

static void list_dir(const char *path, int with_names)
{
    struct nfsdir *dir = NULL;
    int rc = nfs_opendir(nfs, path, &dir);
    if (rc < 0) {
        reply_errno(rc);
        return;
    }
    struct raw_call names; /* reuse the name accumulator */
    memset(&names, 0, sizeof(names));
    uint64_t count = 0;
    struct nfsdirent *ent;
    while ((ent = nfs_readdir(nfs, dir)) != NULL) {
        if (strcmp(ent->name, ".") == 0 || strcmp(ent->name, "..") == 0) {
            continue;
        }
        count++;
        if (with_names) {
            append_name(&names, ent->name);
        }
    }
    nfs_closedir(nfs, dir);
    if (with_names) {
        reply_ok("%" PRIu64 " %s", count, names.names ? names.names : "");
    } else {
        reply_ok("%" PRIu64, count);
    }
    free(names.names);
}

static void cmd_readdir_count(char **argv, int argc)
{
    (void)argc;
    list_dir(argv[0], 0);
}

static void cmd_readdir(char **argv, int argc)
{
    (void)argc;
    list_dir(argv[0], 1);
}

static void reply_handle(const unsigned char *fh, size_t len, const char *suffix)
{
    fputs("ok ", stdout);
    print_hex(stdout, fh, len);
    if (suffix != NULL) {
        fputs(suffix, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
}

static void cmd_fh(char **argv, int argc)
{
    (void)argc;
    struct nfs_fh *root = nfs_get_rootfh(nfs);
    unsigned char cur[MAX_RAW_HANDLE_BYTES];
    size_t cur_len = (size_t)root->len;
    memcpy(cur, root->val, cur_len);
    char *path = strdup(argv[0]);
    char *save = NULL;
    for (char *name = strtok_r(path, "/", &save); name != NULL; name = strtok_r(NULL, "/", &save)) {
        struct raw_call call;
        if (raw_lookup(cur, cur_len, name, &call) != 0) {
            free(path);
            return;
        }
        cur_len = call.fh_len;
        memcpy(cur, call.fh, cur_len);
    }
    free(path);
    reply_handle(cur, cur_len, NULL);
}

static void cmd_fh_open(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    struct nfs_fh *h = nfs_get_fh(fh);
    reply_handle((const unsigned char *)h->val, (size_t)h->len, NULL);
}

static int parse_handle(const char *s, unsigned char **fh, size_t *len)
{
    /* An empty handle is a legitimate forgery to try; "-" spells it on the command line. */
    if (strcmp(s, "-") == 0) {
        *fh = malloc(1);
        *len = 0;
        return *fh == NULL ? -1 : 0;
    }
    if (parse_hex(s, MAX_RAW_HANDLE_BYTES, fh, len) != 0) {
        reply_err("USAGE", "bad handle hex (max %d bytes)", MAX_RAW_HANDLE_BYTES);
        return -1;
    }
    return 0;
}

static void cmd_getattr_raw(char **argv, int argc)
{
    (void)argc;
    unsigned char *fh;
    size_t len;
    struct raw_call call;
    if (parse_handle(argv[0], &fh, &len) != 0) {
        return;
    }
    if (raw_getattr(fh, len, &call) == 0) {
        fputs("ok ", stdout);
        print_fattr(&call.attr);
        fputc('\n', stdout);
        fflush(stdout);
    }
    free(fh);
}

static void cmd_lookup_raw(char **argv, int argc)
{
    (void)argc;
    unsigned char *fh;
    size_t len;
    struct raw_call call;
    if (parse_handle(argv[0], &fh, &len) != 0) {
        return;
    }
    if (raw_lookup(fh, len, argv[1], &call) == 0) {
        char suffix[64] = "";
        if (call.have_attr) {
            snprintf(suffix, sizeof(suffix), " fileid=%" PRIu64, (uint64_t)call.attr.fileid);
        }
        reply_handle(call.fh, call.fh_len, suffix);
    }
    free(fh);
}

static void cmd_readdir_raw(char **argv, int argc)
{
    (void)argc;
    unsigned char *fh;
    size_t len;
    struct raw_call call;
    if (parse_handle(argv[0], &fh, &len) != 0) {
        return;
    }
    if (raw_readdir(fh, len, &call) == 0) {
        reply_ok("%" PRIu64 " %s", call.entries, call.names ? call.names : "");
    }
    free(call.names);
    free(fh);
}

static void cmd_read_raw(char **argv, int argc)
{
    (void)argc;
    unsigned char *fh;
    size_t len;
    uint64_t offset, count;
    struct raw_call call;
    if (parse_handle(argv[0], &fh, &len) != 0) {
        return;
    }
    if (parse_u64(argv[1], &offset) != 0 || parse_u64(argv[2], &count) != 0 || count > MAX_PREAD_BYTES) {
        reply_err("USAGE", "bad offset or count");
        free(fh);
        return;
    }
    if (raw_read(fh, len, offset, (uint32_t)count, &call) == 0) {
        printf("ok eof=%d ", call.eof);
        print_hex(stdout, call.data, call.data_len);
        fputc('\n', stdout);
        fflush(stdout);
    }
    free(call.data);
    free(fh);
}

static void write_unstable(const unsigned char *fh, size_t len, const char *off_s, const char *data_s)
{
    uint64_t offset;
    unsigned char *data;
    size_t data_len;
    struct raw_call call;
    if (parse_u64(off_s, &offset) != 0 || parse_data(data_s, offset, &data, &data_len) != 0) {
        reply_err("USAGE", "bad offset or data");
        return;
    }
    if (raw_write(fh, len, offset, data, data_len, &call) == 0) {
        static const char *stable_names[] = {"UNSTABLE", "DATA_SYNC", "FILE_SYNC"};
        const char *committed =
            call.committed >= 0 && call.committed <= 2 ? stable_names[call.committed] : "INVALID";
        printf("ok count=%u committed=%s verf=", call.count, committed);
        print_hex(stdout, call.verf, NFS3_WRITEVERFSIZE);
        fputc('\n', stdout);
        fflush(stdout);
    }
    free(data);
}

static void cmd_write_unstable(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    struct nfs_fh *h = nfs_get_fh(fh);
    write_unstable((const unsigned char *)h->val, (size_t)h->len, argv[1], argv[2]);
}

static void cmd_write_unstable_raw(char **argv, int argc)
{
    (void)argc;
    unsigned char *fh;
    size_t len;
    if (parse_handle(argv[0], &fh, &len) != 0) {
        return;
    }
    write_unstable(fh, len, argv[1], argv[2]);
    free(fh);
}

static void cmd_commit(char **argv, int argc)
{
    (void)argc;
    struct nfsfh *fh = file_by_id(argv[0]);
    struct raw_call call;
    if (fh == NULL) {
        reply_err("EBADF", "no open file %s", argv[0]);
        return;
    }
    struct nfs_fh *h = nfs_get_fh(fh);
    if (raw_commit((const unsigned char *)h->val, (size_t)h->len, &call) == 0) {
        fputs("ok verf=", stdout);
        print_hex(stdout, call.verf, NFS3_WRITEVERFSIZE);
        fputc('\n', stdout);
        fflush(stdout);
    }
}

static void cmd_null(char **argv, int argc)
{
    (void)argv;
    (void)argc;
    struct raw_call call;
    memset(&call, 0, sizeof(call));
    int q = rpc_nfs3_null_async(rpc(), raw_cb, &call);
    int w = q == 0 ? raw_wait(&call) : 0;
    /* NULL's reply is void, so only the RPC status says anything. */
    if (q != 0 || w != 0 || call.rpc_status != RPC_STATUS_SUCCESS) {
        reply_err("RPC", "NULL failed: %s", q != 0 ? nfs_get_error(nfs) : call.rpc_error);
        return;
    }
    reply_ok(NULL);
}

static void cmd_echo(char **argv, int argc)
{
    char buf[1024] = "";
    for (int i = 0; i < argc; i++) {
        if (i > 0) {
            strncat(buf, " ", sizeof(buf) - strlen(buf) - 1);
        }
        strncat(buf, argv[i], sizeof(buf) - strlen(buf) - 1);
    }
    reply_ok("%s", buf);
}

static const struct command commands[] = {
    {"mkdir", 1, 2, "mkdir PATH [MODE]", cmd_mkdir},
    {"rmdir", 1, 1, "rmdir PATH", cmd_rmdir},
    {"unlink", 1, 1, "unlink PATH", cmd_unlink},
    {"rename", 2, 2, "rename FROM TO", cmd_rename},
    {"link", 2, 2, "link EXISTING NEW", cmd_link},
    {"symlink", 2, 2, "symlink TARGET LINKPATH", cmd_symlink},
    {"readlink", 1, 1, "readlink PATH", cmd_readlink},
    {"stat", 1, 1, "stat PATH", cmd_stat},
    {"lstat", 1, 1, "lstat PATH", cmd_lstat},
    {"fstat", 1, 1, "fstat ID", cmd_fstat},
    {"chmod", 2, 2, "chmod PATH MODE", cmd_chmod},
    {"chown", 3, 3, "chown PATH UID GID", cmd_chown},
    {"truncate", 2, 2, "truncate PATH LEN", cmd_truncate},
    {"open", 2, 3, "open PATH FLAGS [MODE]", cmd_open},
    {"pwrite", 3, 3, "pwrite ID OFF DATA", cmd_pwrite},
    {"pread", 3, 3, "pread ID OFF LEN", cmd_pread},
    {"pverify", 3, 3, "pverify ID OFF pat:SEED:LEN", cmd_pverify},
    {"ftruncate", 2, 2, "ftruncate ID LEN", cmd_ftruncate},
    {"fsync", 1, 1, "fsync ID", cmd_fsync},
    {"close", 1, 1, "close ID", cmd_close},
    {"readdir-count", 1, 1, "readdir-count PATH", cmd_readdir_count},
    {"readdir", 1, 1, "readdir PATH", cmd_readdir},
    {"fh", 1, 1, "fh PATH", cmd_fh},
    {"fh-open", 1, 1, "fh-open ID", cmd_fh_open},
    {"getattr-raw", 1, 1, "getattr-raw HEX", cmd_getattr_raw},
    {"lookup-raw", 2, 2, "lookup-raw HEX NAME", cmd_lookup_raw},
    {"readdir-raw", 1, 1, "readdir-raw HEX", cmd_readdir_raw},
    {"read-raw", 3, 3, "read-raw HEX OFF LEN", cmd_read_raw},
    {"write-unstable", 3, 3, "write-unstable ID OFF DATA", cmd_write_unstable},
    {"write-unstable-raw", 3, 3, "write-unstable-raw HEX OFF DATA", cmd_write_unstable_raw},
    {"commit", 1, 1, "commit ID", cmd_commit},
    {"null", 0, 0, "null", cmd_null},
    {"echo", 0, MAX_ARGS, "echo TEXT", cmd_echo},
};

static void dispatch(char *line)
{
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    char *save = NULL;
    char *name = strtok_r(line, " \t", &save);
    if (name == NULL) {
        reply_err("USAGE", "empty command");
        return;
    }
    for (char *tok = strtok_r(NULL, " \t", &save); tok != NULL; tok = strtok_r(NULL, " \t", &save)) {
        if (argc == MAX_ARGS) {
            reply_err("USAGE", "too many arguments");
            return;
        }
        argv[argc++] = tok;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        const struct command *c = &commands[i];
        if (strcmp(c->name, name) != 0) {
            continue;
        }
        if (argc < c->min_args || argc > c->max_args) {
            reply_err("USAGE", "%s", c->usage);
            return;
        }
        c->run(argv, argc);
        return;
    }
    reply_err("USAGE", "unknown command %s", name);
}

/* Confirms that our mirror of `struct nfs_fh` matches this libnfs (see the top of the file). */
static int check_handle_layout(void)
{
    struct nfs_fh *root = nfs_get_rootfh(nfs);
    struct nfs_stat_64 st;
    struct raw_call call;
    if (root == NULL || root->len <= 0 || root->len > NFS3_FHSIZE_MAX || root->val == NULL) {
        fprintf(stderr, "nfsop: libnfs root handle has an unexpected layout\n");
        return -1;
    }
    if (nfs_stat64(nfs, "/", &st) < 0) {
        fprintf(stderr, "nfsop: stat / failed: %s\n", nfs_get_error(nfs));
        return -1;
    }
    if (raw_getattr((const unsigned char *)root->val, (size_t)root->len, &call) != 0) {
        fprintf(stderr, "nfsop: GETATTR of the root handle failed (printed above)\n");
        return -1;
    }
    if ((uint64_t)call.attr.fileid != st.nfs_ino) {
        fprintf(stderr, "nfsop: root handle mirror is wrong: fileid %" PRIu64 " != ino %" PRIu64 "\n",
                (uint64_t)call.attr.fileid, st.nfs_ino);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: nfsop NFS-URL < commands\n");
        return 2;
    }
    const char *timeout_env = getenv("NFSOP_TIMEOUT_MS");
    if (timeout_env != NULL) {
        raw_timeout_ms = atoi(timeout_env);
    }
    nfs = nfs_init_context();
    if (nfs == NULL) {
        fprintf(stderr, "nfsop: nfs_init_context failed\n");
        return 1;
    }
    struct nfs_url *url = nfs_parse_url_dir(nfs, argv[1]);
    if (url == NULL) {
        fprintf(stderr, "nfsop: bad URL %s: %s\n", argv[1], nfs_get_error(nfs));
        return 1;
    }
    if (nfs_mount(nfs, url->server, url->path) != 0) {
        /* The mount line is the first reply, so a test can assert on a refused mount too. */
        printf("err MOUNT %s\n", nfs_get_error(nfs));
        fflush(stdout);
        return 1;
    }
    nfs_destroy_url(url);
    /* Stdout is consumed line by line by the harness; a half-printed line would stall it. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (check_handle_layout() != 0) {
        printf("err LAYOUT libnfs handle layout check failed, see stderr\n");
        return 1;
    }
    printf("ok mounted\n");
    fflush(stdout);

    char *line = malloc(MAX_LINE_BYTES);
    if (line == NULL) {
        return 1;
    }
    while (fgets(line, MAX_LINE_BYTES, stdin) != NULL) {
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] != '\n' && !feof(stdin)) {
            reply_err("USAGE", "line longer than %d bytes", MAX_LINE_BYTES);
            int c;
            while ((c = getchar()) != EOF && c != '\n') {
            }
            continue;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
            line[--n] = '\0';
        }
        if (n == 0 || line[0] == '#') {
            continue;
        }
        dispatch(line);
    }
    free(line);
    for (int i = 1; i < MAX_OPEN_FILES; i++) {
        if (open_files[i] != NULL) {
            nfs_close(nfs, open_files[i]);
        }
    }
    nfs_umount(nfs);
    nfs_destroy_context(nfs);
    return 0;
}
