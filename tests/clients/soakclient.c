/*
 * soakclient: one client of scripts/cluster-soak.sh (issue 20: several heads, a head killed with
 * kill -9 in the middle of the work). It writes, reads back and locks for a bounded time and
 * logs every acknowledged call, so the script can tell afterwards what a client was promised:
 *
 *   soakclient posix FILE LOCKFILE ID SECONDS FSYNC_EVERY HOLD_MAX_MS LOG
 *       through a mount (an `eagernfs mount`): pwrite, fsync every FSYNC_EVERY writes, pread
 *       back, and a non-blocking fcntl write lock on byte 0 of LOCKFILE held up to HOLD_MAX_MS
 *       (LOCKFILE "-": no locks; FILE "-": locks only, so a lock refused in a grace period
 *       does not hold up the data calls of the same client)
 *   soakclient nfs URL FILE ID SECONDS FSYNC_EVERY LOG
 *       through libnfs (URL: nfs://ADDR/?nfsport=P&mountport=P&version=3, FILE relative to it):
 *       the same without locks (libnfs 4.0's nfs_lockf/nfs_fcntl are NFSv4 only); FSYNC_EVERY 0
 *       opens the file O_SYNC (every WRITE is FILE_SYNC, committed when acknowledged)
 *   soakclient verify URL FILE ID LOG
 *       reads FILE through libnfs and prints one line per block the log says was written:
 *       "seq offset length ok|bad|short"
 *
 * Block SEQ (16 KiB) lives at SEQ*16 KiB; its bytes are a function of (ID, SEQ), so the verifier
 * regenerates them. Log lines (times are CLOCK_REALTIME milliseconds, when the call returned):
 *   W seq t hash        a write acknowledged (committed only once an S covers it)
 *   S seq t             fsync/COMMIT (or a FILE_SYNC write) returned: writes <= seq committed
 *   R seq t ok|bad      the block read back
 *   L t_acquired t_released   a lock held in between (the client's view)
 *   B t                 a lock refused because another holds it (the server answered)
 *   E op errno t        a call failed (it is retried)
 *   X seq t             block SEQ written again (UNSTABLE) because a COMMIT's verifier differed
 *                       from the one its WRITE returned (libnfs clients, see below)
 *   M verifier|plain|file_sync   (first line of a libnfs data client) which write path ran
 * Every loop is bounded by SECONDS (plus 60 s for the final fsync).
 *
 * The libnfs client and NFSv3's write verifier. With FSYNC_EVERY > 0 the file is opened without
 * O_SYNC, so libnfs sends every WRITE UNSTABLE (libnfs 4.0.0, lib/nfs_v3.c,
 * nfs3_fill_WRITE3args: `stable = fh->is_sync ? FILE_SYNC : UNSTABLE`). NFSv3 (RFC 1813, WRITE
 * and COMMIT) makes the client responsible for such data until a COMMIT covers it: it keeps the
 * verifier each WRITE returned and, when the COMMIT's verifier differs (the server restarted and
 * may have lost the data), writes the data again and commits again. libnfs 4.0's high-level API
 * does not: nfs3_pwrite_mcb never reads WRITE3resok.verf and nfs3_fsync_cb only checks the
 * COMMIT's status (lib/nfs_v3.c; the verifier appears nowhere in lib/ outside READDIR cookies),
 * so an nfs_fsync that follows a head's kill -9 succeeds on the new head while the writes the
 * dead head acknowledged UNSTABLE are gone. By default (SOAK_LIBNFS_VERIFIER unset or 1) this
 * client therefore follows the rule itself through libnfs's raw RPC layer on the same
 * connection (nfs_get_rpc_context, rpc_nfs3_write_async, rpc_nfs3_commit_async, the handle from
 * nfs_get_fh): it keeps the verifier of every UNSTABLE WRITE since the last good COMMIT, and at
 * fsync time resends (X lines) the blocks whose verifier differs from the COMMIT's and commits
 * again until they agree; only then is S logged. The rpc_context is the nfs_context's one for
 * its whole life: libnfs's autoreconnect reconnects that same context (lib/socket.c,
 * rpc_reconnect_requeue), so the raw calls keep working after a head is restarted.
 * SOAK_LIBNFS_VERIFIER=0 runs the plain high-level path (nfs_pwrite/nfs_fsync), to show what a
 * libnfs 4.0 application gets. Reads use nfs_pread in both modes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <poll.h>

/* libnfs declares struct nfs_fh (what nfs_get_fh returns) only in its private header
 * (include/libnfs-private.h, 4.0.0 and later: a length and a pointer); the layout is repeated here. */
struct nfs_fh {
    int len;
    char *val;
};

#define BLOCK 16384

static FILE *logf_;
static unsigned client_id;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(double ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)((ms - 1000 * (long)(ms / 1000)) * 1e6) };
    nanosleep(&ts, NULL);
}

static void fill(char *buf, uint64_t seq)
{
    uint64_t x = 0x9E3779B97F4A7C15ull ^ ((uint64_t)client_id << 40) ^ (seq * 0xBF58476D1CE4E5B9ull) ^ 1;
    for (size_t i = 0; i < BLOCK; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
}

static uint64_t fnv(const char *buf, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ull;
    return h;
}

static void logline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logline(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(logf_, fmt, ap);
    va_end(ap);
    fflush(logf_);
}

/* An UNSTABLE write not yet covered by a COMMIT, and the verifier its WRITE returned. */
struct pending {
    uint64_t seq;
    char verf[NFS3_WRITEVERFSIZE];
};

/* The I/O of one client: POSIX calls on a mount or libnfs calls. */
struct io {
    int posix;
    int fd;
    struct nfs_context *nfs;
    struct nfsfh *fh;
    /* libnfs with the verifier rule (see the header): WRITE and COMMIT through the raw layer. */
    int verifier;
    struct pending *pend;
    size_t npend, cap;
};

/* One raw call's reply. Heap-allocated: when the client stops waiting (a bounded wait), the
 * call may still be queued in libnfs, and its callback then frees the reply. */
struct raw_reply {
    int done, abandoned;
    int rpc_status;
    int nfs_status;
    uint32_t count;
    int committed;
    char verf[NFS3_WRITEVERFSIZE];
};

static void raw_done(struct raw_reply *r, int status)
{
    r->rpc_status = status;
    r->done = 1;
    if (r->abandoned)
        free(r);
}

static void raw_write_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_reply *r = priv;
    if (status == RPC_STATUS_SUCCESS) {
        WRITE3res *res = data;
        r->nfs_status = res->status;
        if (res->status == NFS3_OK) {
            r->count = res->WRITE3res_u.resok.count;
            r->committed = res->WRITE3res_u.resok.committed;
            memcpy(r->verf, res->WRITE3res_u.resok.verf, NFS3_WRITEVERFSIZE);
        }
    }
    raw_done(r, status);
}

static void raw_commit_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
    (void)rpc;
    struct raw_reply *r = priv;
    if (status == RPC_STATUS_SUCCESS) {
        COMMIT3res *res = data;
        r->nfs_status = res->status;
        if (res->status == NFS3_OK)
            memcpy(r->verf, res->COMMIT3res_u.resok.verf, NFS3_WRITEVERFSIZE);
    }
    raw_done(r, status);
}

/* Drives the nfs_context's connection (the same loop as libnfs's own synchronous calls) until the
 * reply comes, for at most 30 s; libnfs's per-call timeout (nfs_set_timeout) normally ends a
 * call first. Returns 0 or an errno; the reply is freed here unless abandoned to its callback. */
static int raw_wait(struct io *io, struct raw_reply *r, struct raw_reply *out)
{
    double end = now_ms() + 30000;
    while (!r->done && now_ms() < end) {
        struct pollfd pfd = { .fd = nfs_get_fd(io->nfs), .events = (short)nfs_which_events(io->nfs) };
        int n = poll(&pfd, 1, 100);
        if (n < 0)
            continue; /* EINTR: nothing to service */
        if (nfs_service(io->nfs, pfd.revents) < 0 && !r->done)
            sleep_ms(10); /* a reconnect attempt failed: libnfs starts the next one itself */
    }
    if (!r->done) {
        r->abandoned = 1;
        return ETIMEDOUT;
    }
    *out = *r;
    free(r);
    if (out->rpc_status == RPC_STATUS_TIMEOUT)
        return ETIMEDOUT;
    if (out->rpc_status != RPC_STATUS_SUCCESS)
        return out->rpc_status == RPC_STATUS_CANCEL ? EINTR : EIO;
    if (out->nfs_status != NFS3_OK) {
        int e = -nfsstat3_to_errno(out->nfs_status);
        return e > 0 ? e : EIO;
    }
    return 0;
}

static struct nfs_fh3 raw_fh(struct io *io)
{
    struct nfs_fh *fh = nfs_get_fh(io->fh);
    struct nfs_fh3 f = { .data = { .data_len = (u_int)fh->len, .data_val = fh->val } };
    return f;
}

/* One UNSTABLE WRITE of a whole block; its verifier in *verf, and whether the server said it is
 * already stable (FILE_SYNC or DATA_SYNC: no COMMIT needed). */
static int raw_write(struct io *io, const char *buf, uint64_t off, char *verf, int *stable)
{
    struct raw_reply *r = calloc(1, sizeof *r), rep;
    if (!r)
        return ENOMEM;
    WRITE3args args = { .file = raw_fh(io), .offset = off, .count = BLOCK, .stable = UNSTABLE,
                        .data = { .data_len = BLOCK, .data_val = (char *)buf } };
    /* The data is encoded into the call here, so buf may change once this returns. */
    if (rpc_nfs3_write_async(nfs_get_rpc_context(io->nfs), raw_write_cb, &args, r) != 0) {
        free(r);
        return EIO;
    }
    int err = raw_wait(io, r, &rep);
    if (err)
        return err;
    if (rep.count != BLOCK)
        return EIO; /* a short write: the block is written again */
    memcpy(verf, rep.verf, NFS3_WRITEVERFSIZE);
    *stable = rep.committed != UNSTABLE;
    return 0;
}

static int raw_commit(struct io *io, char *verf)
{
    struct raw_reply *r = calloc(1, sizeof *r), rep;
    if (!r)
        return ENOMEM;
    COMMIT3args args = { .file = raw_fh(io), .offset = 0, .count = 0 };
    if (rpc_nfs3_commit_async(nfs_get_rpc_context(io->nfs), raw_commit_cb, &args, r) != 0) {
        free(r);
        return EIO;
    }
    int err = raw_wait(io, r, &rep);
    if (!err)
        memcpy(verf, rep.verf, NFS3_WRITEVERFSIZE);
    return err;
}

static void remember(struct io *io, uint64_t seq, const char *verf)
{
    for (size_t i = 0; i < io->npend; i++)
        if (io->pend[i].seq == seq) {
            memcpy(io->pend[i].verf, verf, NFS3_WRITEVERFSIZE);
            return;
        }
    if (io->npend == io->cap) {
        io->cap = io->cap ? 2 * io->cap : 16;
        io->pend = realloc(io->pend, io->cap * sizeof *io->pend);
        if (!io->pend) {
            fprintf(stderr, "soakclient: out of memory\n");
            exit(1);
        }
    }
    io->pend[io->npend].seq = seq;
    memcpy(io->pend[io->npend].verf, verf, NFS3_WRITEVERFSIZE);
    io->npend++;
}

/* fsync with NFSv3's rule: COMMIT; every pending block whose WRITE verifier differs from the
 * COMMIT's is written again and the COMMIT repeated, until one COMMIT agrees with all of them.
 * An error ends the attempt (the caller logs it and tries again later, as for any fsync); the
 * blocks stay pending, with the verifiers of whatever was resent. */
static int raw_fsync(struct io *io)
{
    char buf[BLOCK];
    for (int attempt = 0; attempt < 20; attempt++) {
        char cverf[NFS3_WRITEVERFSIZE];
        int err = raw_commit(io, cverf);
        if (err)
            return err;
        size_t differ = 0;
        for (size_t i = 0; i < io->npend; i++) {
            struct pending *p = &io->pend[i];
            if (memcmp(p->verf, cverf, NFS3_WRITEVERFSIZE) == 0)
                continue;
            differ++;
            fill(buf, p->seq);
            int stable;
            char wverf[NFS3_WRITEVERFSIZE];
            if ((err = raw_write(io, buf, p->seq * BLOCK, wverf, &stable)) != 0) {
                logline("E write %d %.3f\n", err, now_ms());
                return err;
            }
            memcpy(p->verf, wverf, NFS3_WRITEVERFSIZE);
            logline("X %" PRIu64 " %.3f\n", p->seq, now_ms());
        }
        if (differ == 0) {
            io->npend = 0;
            return 0;
        }
    }
    return EAGAIN; /* the verifier kept changing: still pending, tried again at the next fsync */
}

static int io_pwrite(struct io *io, const char *buf, uint64_t off)
{
    if (io->posix)
        return pwrite(io->fd, buf, BLOCK, off) == BLOCK ? 0 : (errno ? errno : EIO);
    if (io->verifier) {
        char verf[NFS3_WRITEVERFSIZE];
        int stable;
        int err = raw_write(io, buf, off, verf, &stable);
        if (!err && !stable)
            remember(io, off / BLOCK, verf);
        return err;
    }
    int rc = nfs_pwrite(io->nfs, io->fh, off, BLOCK, buf);
    return rc == BLOCK ? 0 : (rc < 0 ? -rc : EIO);
}

static int io_pread(struct io *io, char *buf, uint64_t off)
{
    if (io->posix)
        return pread(io->fd, buf, BLOCK, off) == BLOCK ? 0 : (errno ? errno : EIO);
    int rc = nfs_pread(io->nfs, io->fh, off, BLOCK, buf);
    return rc == BLOCK ? 0 : (rc < 0 ? -rc : EIO);
}

static int io_fsync(struct io *io)
{
    if (io->posix)
        return fsync(io->fd) == 0 ? 0 : errno;
    if (io->verifier)
        return raw_fsync(io);
    int rc = nfs_fsync(io->nfs, io->fh);
    return rc == 0 ? 0 : -rc;
}

static struct nfs_context *nfs_connect(const char *url_text, char **dir)
{
    struct nfs_context *nfs = nfs_init_context();
    if (!nfs) {
        fprintf(stderr, "soakclient: nfs_init_context failed\n");
        exit(1);
    }
    struct nfs_url *url = nfs_parse_url_dir(nfs, url_text);
    if (!url) {
        fprintf(stderr, "soakclient: bad URL %s: %s\n", url_text, nfs_get_error(nfs));
        exit(2);
    }
    nfs_set_timeout(nfs, 5000);
    /* Mounting is retried: the head may be the one being replaced. */
    double end = now_ms() + 60000;
    while (nfs_mount(nfs, url->server, url->path) != 0) {
        if (now_ms() > end) {
            fprintf(stderr, "soakclient: mount %s: %s\n", url_text, nfs_get_error(nfs));
            exit(1);
        }
        sleep_ms(200);
    }
    nfs_set_autoreconnect(nfs, -1);
    /* The directory without a trailing slash ("" for the export's root): paths are DIR/FILE. */
    *dir = strdup(url->file ? url->file : "");
    size_t n = strlen(*dir);
    while (n > 0 && (*dir)[n - 1] == '/')
        (*dir)[--n] = 0;
    nfs_destroy_url(url);
    return nfs;
}

static int verify(const char *url_text, const char *file, const char *log_path)
{
    char *dir;
    struct nfs_context *nfs = nfs_connect(url_text, &dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    struct nfsfh *fh;
    int rc = nfs_open(nfs, path, O_RDONLY, &fh);
    FILE *in = fopen(log_path, "r");
    if (!in) {
        perror(log_path);
        return 1;
    }
    char line[256], want[BLOCK], got[BLOCK];
    while (fgets(line, sizeof line, in)) {
        uint64_t seq;
        double t;
        if (sscanf(line, "W %" SCNu64 " %lf", &seq, &t) != 2)
            continue;
        const char *status = "short";
        if (rc == 0) {
            int n = nfs_pread(nfs, fh, seq * BLOCK, BLOCK, got);
            fill(want, seq);
            if (n == BLOCK)
                status = memcmp(want, got, BLOCK) == 0 ? "ok" : "bad";
            else if (n < 0)
                status = "error";
        }
        printf("%" PRIu64 " %" PRIu64 " %d %s\n", seq, seq * BLOCK, BLOCK, status);
    }
    if (rc != 0)
        fprintf(stderr, "soakclient: open %s: %s\n", path, nfs_get_error(nfs));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "verify") == 0) {
        if (argc != 6) {
            fprintf(stderr, "usage: soakclient verify URL FILE ID LOG\n");
            return 2;
        }
        client_id = (unsigned)atoi(argv[4]);
        return verify(argv[2], argv[3], argv[5]);
    }
    int posix = argc == 9 && strcmp(argv[1], "posix") == 0;
    int viaf = argc == 8 && strcmp(argv[1], "nfs") == 0;
    if (!posix && !viaf) {
        fprintf(stderr, "usage: soakclient posix FILE LOCKFILE ID SECONDS FSYNC_EVERY HOLD_MAX_MS LOG\n"
                        "       soakclient nfs URL FILE ID SECONDS FSYNC_EVERY LOG\n"
                        "       soakclient verify URL FILE ID LOG\n"
                        "(environment: SOAK_LIBNFS_VERIFIER=0 for libnfs's plain nfs_pwrite/nfs_fsync)\n");
        return 2;
    }
    const char *lockfile = posix ? argv[3] : "-";
    client_id = (unsigned)atoi(argv[4]);
    double seconds = atof(argv[5]);
    int fsync_every = atoi(argv[6]);
    double hold_max = posix ? atof(argv[7]) : 0;
    logf_ = fopen(argv[posix ? 8 : 7], "a");
    if (!logf_ || seconds <= 0 || seconds > 3600 || fsync_every < 0) {
        fprintf(stderr, "soakclient: bad arguments (SECONDS 0..3600, a writable LOG)\n");
        return 2;
    }
    struct io io = { .posix = posix, .fd = -1 };
    int data = !posix || strcmp(argv[2], "-") != 0;
    if (!data) {
    } else if (posix) {
        io.fd = open(argv[2], O_RDWR | O_CREAT | (fsync_every == 0 ? O_SYNC : 0), 0644);
        if (io.fd < 0) {
            fprintf(stderr, "soakclient: open %s: %s\n", argv[2], strerror(errno));
            return 1;
        }
    } else {
        char *dir, path[4096];
        const char *rule = getenv("SOAK_LIBNFS_VERIFIER");
        io.verifier = fsync_every > 0 && !(rule && strcmp(rule, "0") == 0);
        logline("M %s\n", fsync_every == 0 ? "file_sync" : io.verifier ? "verifier" : "plain");
        io.nfs = nfs_connect(argv[2], &dir);
        snprintf(path, sizeof path, "%s/%s", dir, argv[3]);
        int flags = O_RDWR | O_CREAT | (fsync_every == 0 ? O_SYNC : 0);
        double end = now_ms() + 60000;
        int rc;
        while ((rc = nfs_open2(io.nfs, path, flags, 0644, &io.fh)) != 0) {
            logline("E open %d %.3f\n", -rc, now_ms());
            if (now_ms() > end) {
                fprintf(stderr, "soakclient: open %s: %s\n", path, nfs_get_error(io.nfs));
                return 1;
            }
            sleep_ms(100);
        }
    }
    int lockfd = -1;
    if (strcmp(lockfile, "-") != 0 && (lockfd = open(lockfile, O_RDWR | O_CREAT, 0644)) < 0) {
        fprintf(stderr, "soakclient: open %s: %s\n", lockfile, strerror(errno));
        return 1;
    }
    srand(client_id * 7919 + (unsigned)getpid());
    char buf[BLOCK], back[BLOCK];
    double end = now_ms() + seconds * 1000;
    uint64_t seq = 0;
    int err;
    while (now_ms() < end) {
        if (!data)
            goto lock;
        fill(buf, seq);
        if ((err = io_pwrite(&io, buf, seq * BLOCK)) != 0) {
            logline("E write %d %.3f\n", err, now_ms());
            sleep_ms(100);
            continue; /* the same block again */
        }
        logline("W %" PRIu64 " %.3f %016" PRIx64 "\n", seq, now_ms(), fnv(buf, BLOCK));
        if (fsync_every == 0)
            logline("S %" PRIu64 " %.3f\n", seq, now_ms());
        else if ((seq + 1) % fsync_every == 0) {
            if ((err = io_fsync(&io)) != 0)
                logline("E fsync %d %.3f\n", err, now_ms());
            else
                logline("S %" PRIu64 " %.3f\n", seq, now_ms());
        }
        if ((err = io_pread(&io, back, seq * BLOCK)) != 0)
            logline("E read %d %.3f\n", err, now_ms());
        else
            logline("R %" PRIu64 " %.3f %s\n", seq, now_ms(), memcmp(buf, back, BLOCK) ? "bad" : "ok");
        seq++;
    lock:
        if (lockfd >= 0) {
            struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
            if (fcntl(lockfd, F_SETLK, &fl) == 0) {
                double acquired = now_ms();
                sleep_ms(hold_max * (rand() / (RAND_MAX + 1.0)));
                double released = now_ms();
                fl.l_type = F_UNLCK;
                logline("L %.3f %.3f\n", acquired, released);
                while (fcntl(lockfd, F_SETLK, &fl) != 0 && now_ms() < end + 60000) {
                    logline("E unlock %d %.3f\n", errno, now_ms());
                    sleep_ms(100);
                }
            } else if (errno == EAGAIN || errno == EACCES)
                logline("B %.3f\n", now_ms());
            else
                logline("E lock %d %.3f\n", errno, now_ms());
        }
        sleep_ms(20);
    }
    /* Everything written is committed before the client says it is done. */
    if (data && seq > 0 && fsync_every != 0) {
        double hard_end = now_ms() + 60000;
        while ((err = io_fsync(&io)) != 0 && now_ms() < hard_end) {
            logline("E fsync %d %.3f\n", err, now_ms());
            sleep_ms(100);
        }
        if (err == 0)
            logline("S %" PRIu64 " %.3f\n", seq - 1, now_ms());
    }
    if (!data) {
    } else if (posix)
        close(io.fd);
    else {
        nfs_close(io.nfs, io.fh);
        nfs_destroy_context(io.nfs);
        free(io.pend);
    }
    return 0;
}
