/*
 * nfsiops: random small READs or WRITEs through libnfs, an NFS client independent of eagernfs,
 * for scripts/bench-iops.sh (issue 11: 8 KiB QD1 and QD16 against eagernfs and nfs-ganesha).
 *
 *   nfsiops URL FILE read|write SECONDS CLIENTS [BLOCK]
 *
 * URL is a libnfs directory URL (nfs://127.0.0.1/export?nfsport=P&mountport=M). FILE must exist
 * in it; its size bounds the offsets. CLIENTS threads each mount on their own (one context, one
 * connection, one call in flight each), so CLIENTS is the queue depth the server sees. Each
 * thread picks block-aligned offsets uniformly at random (a per-thread xorshift) for SECONDS.
 * Prints one line: `ops=N seconds=S iops=X` (and exits 1 on any failed call, after saying why).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <nfsc/libnfs.h>

static const char *url_text, *file_name;
static int writing;
static double seconds;
static size_t block = 8192;
static volatile int failed;

struct worker {
    pthread_t thread;
    unsigned id;
    uint64_t ops;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct nfs_context *nfs = nfs_init_context();
    if (!nfs) {
        fprintf(stderr, "nfsiops: nfs_init_context failed\n");
        failed = 1;
        return NULL;
    }
    struct nfs_url *url = nfs_parse_url_dir(nfs, url_text);
    if (!url || nfs_mount(nfs, url->server, url->path) != 0) {
        fprintf(stderr, "nfsiops: mount %s: %s\n", url_text, nfs_get_error(nfs));
        failed = 1;
        return NULL;
    }
    struct nfsfh *fh;
    char path[4096];
    snprintf(path, sizeof path, "%s%s", url->file ? url->file : "/", file_name);
    nfs_destroy_url(url);
    if (nfs_open(nfs, path, writing ? O_RDWR : O_RDONLY, &fh) != 0) {
        fprintf(stderr, "nfsiops: open %s: %s\n", path, nfs_get_error(nfs));
        failed = 1;
        return NULL;
    }
    struct nfs_stat_64 st;
    if (nfs_fstat64(nfs, fh, &st) != 0 || st.nfs_size < block) {
        fprintf(stderr, "nfsiops: %s is missing or smaller than one block\n", path);
        failed = 1;
        return NULL;
    }
    uint64_t blocks = st.nfs_size / block;
    char *buf = malloc(block);
    memset(buf, 0x5a + w->id, block);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ ((uint64_t)w->id << 17 | 1);
    double end = now() + seconds;
    while (!failed && now() < end) {
        for (int i = 0; i < 16; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            uint64_t offset = (x % blocks) * block;
            int rc = writing ? nfs_pwrite(nfs, fh, offset, block, buf) : nfs_pread(nfs, fh, offset, block, buf);
            if (rc != (int)block) {
                fprintf(stderr, "nfsiops: %s at %" PRIu64 ": %d %s\n", writing ? "pwrite" : "pread", offset, rc,
                        nfs_get_error(nfs));
                failed = 1;
                break;
            }
            w->ops++;
        }
    }
    nfs_close(nfs, fh);
    nfs_destroy_context(nfs);
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 6 || argc > 7) {
        fprintf(stderr, "usage: nfsiops URL FILE read|write SECONDS CLIENTS [BLOCK]\n");
        return 2;
    }
    url_text = argv[1];
    file_name = argv[2];
    writing = strcmp(argv[3], "write") == 0;
    if (!writing && strcmp(argv[3], "read") != 0) {
        fprintf(stderr, "nfsiops: read or write, not %s\n", argv[3]);
        return 2;
    }
    seconds = atof(argv[4]);
    int clients = atoi(argv[5]);
    if (argc == 7)
        block = (size_t)atol(argv[6]);
    if (seconds <= 0 || seconds > 3600 || clients < 1 || clients > 256 || block < 512 || block > (1 << 20)) {
        fprintf(stderr, "nfsiops: SECONDS 0..3600, CLIENTS 1..256, BLOCK 512..1048576\n");
        return 2;
    }
    struct worker *w = calloc(clients, sizeof *w);
    double start = now();
    for (int i = 0; i < clients; i++) {
        w[i].id = i;
        pthread_create(&w[i].thread, NULL, run, &w[i]);
    }
    uint64_t ops = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(w[i].thread, NULL);
        ops += w[i].ops;
    }
    double took = now() - start;
    printf("ops=%" PRIu64 " seconds=%.3f iops=%.1f\n", ops, took, ops / took);
    return failed ? 1 : 0;
}
