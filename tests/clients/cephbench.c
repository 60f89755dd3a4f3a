/*
 * cephbench: the native CephFS client for scripts/bench-ceph.sh, the ceiling NFS heads over
 * CephFS are compared with: the same I/O patterns as the NFS benchmarks, through libcephfs in
 * this process (no NFS, no FUSE).
 *
 *   cephbench CONF FSNAME stream PATH SIZE_MIB IN_FLIGHT    1 MiB writes, fsync, then 1 MiB reads
 *   cephbench CONF FSNAME randio PATH read|write SECONDS THREADS  8 KiB at random offsets
 *
 * IN_FLIGHT/THREADS threads share one mount (one MDS session), as the calls of an NFS server
 * do; each takes the next 1 MiB piece (streams) or a random 8 KiB block of the file (randio),
 * so that many calls are in flight at once. Output, one line:
 *   stream:  `write_mbps=X write_mbps_with_sync=Y read_mbps=Z` (Y: the writes and the fsync;
 *            the read comes after, in the same mount, as an NFS server reads a file it wrote)
 *   randio:  `ops=N seconds=S iops=X` (the format of tests/clients/nfsiops.c); writes end
 *            with an fsync, counted in S, as an NFS client's COMMIT at close is
 * Exits 1 on any failed call, after saying why.
 */
#define _FILE_OFFSET_BITS 64
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <dirent.h>

#include <cephfs/libcephfs.h>

#define PIECE (1 << 20)
#define BLOCK 8192

static struct ceph_mount_info *cm;
static int fd;
static uint64_t pieces, file_size;
static volatile uint64_t next_piece;
static int writing;
static double seconds;
static volatile int failed;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "cephbench: %s: %s\n", what, strerror(-rc));
    exit(1);
}

static void *stream(void *arg)
{
    (void)arg;
    char *buf = malloc(PIECE);
    for (size_t i = 0; i < PIECE; i++)
        buf[i] = (char)(i * 31 + 7);
    for (;;) {
        uint64_t n = __atomic_fetch_add(&next_piece, 1, __ATOMIC_RELAXED);
        if (n >= pieces || failed)
            break;
        int rc = writing ? ceph_write(cm, fd, buf, PIECE, n * PIECE) : ceph_read(cm, fd, buf, PIECE, n * PIECE);
        if (rc != PIECE) {
            fprintf(stderr, "cephbench: %s at %" PRIu64 ": %d\n", writing ? "write" : "read", n * PIECE, rc);
            failed = 1;
        }
    }
    free(buf);
    return NULL;
}

struct worker {
    pthread_t thread;
    unsigned id;
    uint64_t ops;
};

static void *randio(void *arg)
{
    struct worker *w = arg;
    char buf[BLOCK];
    memset(buf, w->id, sizeof buf);
    uint64_t x = 0x9E3779B97F4A7C15ull * (w->id + 1);
    uint64_t blocks = file_size / BLOCK;
    double end = now() + seconds;
    while (!failed && now() < end) {
        for (int k = 0; k < 64; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            uint64_t offset = (x % blocks) * BLOCK;
            int rc = writing ? ceph_write(cm, fd, buf, BLOCK, offset) : ceph_read(cm, fd, buf, BLOCK, offset);
            if (rc != BLOCK) {
                fprintf(stderr, "cephbench: %s at %" PRIu64 ": %d\n", writing ? "write" : "read", offset, rc);
                failed = 1;
                break;
            }
            w->ops++;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: cephbench CONF FSNAME stream PATH SIZE_MIB IN_FLIGHT\n"
                        "       cephbench CONF FSNAME randio PATH read|write SECONDS THREADS\n");
        return 2;
    }
    const char *conf = argv[1], *fs = argv[2], *mode = argv[3], *path = argv[4];
    int rc;
    if ((rc = ceph_create(&cm, NULL)) < 0)
        die("ceph_create", rc);
    if ((rc = ceph_conf_read_file(cm, conf)) < 0)
        die(conf, rc);
    /* No admin socket: the conf's path is taken by whatever other client runs as admin. */
    ceph_conf_set(cm, "admin_socket", "");
    if ((rc = ceph_init(cm)) < 0)
        die("ceph_init", rc);
    if ((rc = ceph_select_filesystem(cm, fs)) < 0)
        die(fs, rc);
    if ((rc = ceph_mount(cm, "/")) < 0)
        die("ceph_mount", rc);
    double took, synced;
    if (strcmp(mode, "stream") == 0) {
        pieces = strtoull(argv[5], NULL, 10);
        int threads = atoi(argv[6]);
        if (pieces == 0 || threads < 1 || threads > 256) {
            fprintf(stderr, "cephbench: SIZE_MIB > 0, IN_FLIGHT 1..256\n");
            return 2;
        }
        fd = ceph_open(cm, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            die(path, fd);
        pthread_t t[256];
        double mb = (double)pieces * PIECE / 1e6, rates[3];
        for (int pass = 0; pass < 2; pass++) {
            writing = pass == 0;
            next_piece = 0;
            double start = now();
            for (int i = 0; i < threads; i++)
                pthread_create(&t[i], NULL, stream, NULL);
            for (int i = 0; i < threads; i++)
                pthread_join(t[i], NULL);
            took = now() - start;
            if (writing && (rc = ceph_fsync(cm, fd, 0)) < 0)
                die("fsync", rc);
            synced = now() - start;
            if (failed)
                return 1;
            rates[pass ? 2 : 0] = mb / took;
            if (writing)
                rates[1] = mb / synced;
        }
        printf("write_mbps=%.1f write_mbps_with_sync=%.1f read_mbps=%.1f\n", rates[0], rates[1], rates[2]);
    } else if (strcmp(mode, "randio") == 0) {
        writing = strcmp(argv[5], "write") == 0;
        seconds = atof(argv[6]);
        int threads = argc > 7 ? atoi(argv[7]) : 1;
        if (threads < 1 || threads > 256 || seconds <= 0) {
            fprintf(stderr, "cephbench: SECONDS > 0, THREADS 1..256\n");
            return 2;
        }
        fd = ceph_open(cm, path, O_RDWR, 0);
        if (fd < 0)
            die(path, fd);
        struct ceph_statx stx;
        if ((rc = ceph_fstatx(cm, fd, &stx, CEPH_STATX_SIZE, 0)) < 0)
            die("fstatx", rc);
        file_size = stx.stx_size;
        if (file_size < BLOCK) {
            fprintf(stderr, "cephbench: %s is smaller than one block\n", path);
            return 1;
        }
        /* Warm, as an NFS server that has served the file is: read it once, untimed. */
        {
            static char warm[PIECE];
            for (uint64_t off = 0; off < file_size; off += PIECE)
                if (ceph_read(cm, fd, warm, PIECE, off) < 0)
                    break;
        }
        struct worker w[256];
        double start = now();
        for (int i = 0; i < threads; i++) {
            w[i].id = i;
            w[i].ops = 0;
            pthread_create(&w[i].thread, NULL, randio, &w[i]);
        }
        uint64_t ops = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(w[i].thread, NULL);
            ops += w[i].ops;
        }
        /* As an NFS client's close: what was written is made durable, and counts. */
        if (writing && (rc = ceph_fsync(cm, fd, 1)) < 0)
            die("fsync", rc);
        took = now() - start;
        if (failed)
            return 1;
        printf("ops=%" PRIu64 " seconds=%.3f iops=%.1f\n", ops, took, ops / took);
    } else {
        fprintf(stderr, "cephbench: unknown mode %s\n", mode);
        return 2;
    }
    ceph_close(cm, fd);
    ceph_unmount(cm);
    ceph_release(cm);
    return 0;
}
