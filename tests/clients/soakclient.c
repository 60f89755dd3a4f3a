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
 * Every loop is bounded by SECONDS (plus 60 s for the final fsync).
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

/* The I/O of one client: POSIX calls on a mount or libnfs calls. */
struct io {
    int posix;
    int fd;
    struct nfs_context *nfs;
    struct nfsfh *fh;
};

static int io_pwrite(struct io *io, const char *buf, uint64_t off)
{
    if (io->posix)
        return pwrite(io->fd, buf, BLOCK, off) == BLOCK ? 0 : (errno ? errno : EIO);
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
                        "       soakclient verify URL FILE ID LOG\n");
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
    }
    return 0;
}
