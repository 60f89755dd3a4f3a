/*
 * floorfs: the measured floor of a close-to-open NFS client behind FUSE (issue 18).
 *
 * A path-based passthrough of a source directory with libfuse3's high-level API, as cheap as
 * bindfs (default_permissions, use_ino, the library's default 1 s entry/attribute timeouts, no
 * kernel_cache, every call forwarded to the source directory with one *at() system call), that
 * in addition makes a given number of synchronous ONC RPC NULL calls (RFC 5531: program 100003,
 * version 3, procedure 0, AUTH_NONE, TCP record marking) to an NFS server before it answers an
 * open, each read request, an unlink and an rmdir. Each call waits for its reply on the FUSE
 * handler thread itself: no caching, no hand-off to another thread, no pipelining. So with
 * rtt_open=1,rtt_read=1,rtt_unlink=1,rtt_rmdir=1 it costs what a close-to-open NFSv3 client
 * must at least pay per file (the open's attribute check, the READ, the REMOVE/RMDIR), minus
 * the server's work for the real procedure; with every count 0 it is the control (≈ bindfs).
 *
 * Each FUSE thread has its own TCP connection (thread-local, opened on first use, TCP_NODELAY),
 * so the hot path takes no lock. A reply must carry the call's xid, MSG_ACCEPTED and
 * accept_stat SUCCESS; otherwise (or if the connection fails) the FUSE operation fails with
 * EIO and the connection is closed (the next call opens a new one).
 *
 * Build:  cc -O2 -Wall -o floorfs floorfs.c $(pkg-config --cflags --libs fuse3)
 *         (needs libfuse3-dev: apt-get install libfuse3-dev)
 *
 * Mount:  floorfs SRC MOUNTPOINT [-o rtt_server=HOST:PORT,rtt_open=N,rtt_read=N,rtt_unlink=N,
 *                                     rtt_rmdir=N] [-s] [-f] [other FUSE options]
 *         Counts default to 0. Multithreaded unless -s (libfuse's own option), daemonizes
 *         unless -f. Unmount with fusermount3 -u MOUNTPOINT.
 *
 * Ping:   floorfs --ping N HOST:PORT
 *         N closed-loop NULL calls on one connection (after 200 unrecorded warm-up calls);
 *         prints "calls N p50_us X p90_us Y p99_us Z mean_us M": the raw round trip.
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* ---- options ------------------------------------------------------------------------------ */

struct options {
	char *rtt_server;
	int rtt_open, rtt_read, rtt_unlink, rtt_rmdir;
};
static struct options opts;
static struct sockaddr_in server_addr;
static int src_fd = -1;

#define OPT(t, p) { t, offsetof(struct options, p), 1 }
static const struct fuse_opt option_spec[] = {
	OPT("rtt_server=%s", rtt_server),
	OPT("rtt_open=%d", rtt_open),
	OPT("rtt_read=%d", rtt_read),
	OPT("rtt_unlink=%d", rtt_unlink),
	OPT("rtt_rmdir=%d", rtt_rmdir),
	FUSE_OPT_END
};

static int parse_addr(const char *s, struct sockaddr_in *out)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof host)
		return -1;
	memcpy(host, s, colon - s);
	host[colon - s] = 0;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end != 0 || port <= 0 || port > 65535)
		return -1;
	memset(out, 0, sizeof *out);
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &out->sin_addr) == 1 ? 0 : -1;
}

/* ---- the NULL call ------------------------------------------------------------------------ */

static __thread int conn_fd = -1;
static __thread uint32_t next_xid;

static int conn_open(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(fd, (struct sockaddr *)&server_addr, sizeof server_addr) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

/* One NULL call on fd, waiting for its reply. 0 on success, -1 on any failure. */
static int null_call(int fd, uint32_t xid)
{
	unsigned char call[44];
	static const uint32_t body[10] = {
		0, /* xid, set below */
		0, /* CALL */
		2, /* RPC version */
		100003, 3, 0, /* NFS, version 3, NULL */
		0, 0, /* credential: AUTH_NONE, empty */
		0, 0, /* verifier: AUTH_NONE, empty */
	};
	put32(call, 0x80000000u | 40); /* last fragment, 40 bytes */
	for (int i = 0; i < 10; i++)
		put32(call + 4 + 4 * i, body[i]);
	put32(call + 4, xid);
	if (write_all(fd, call, sizeof call) < 0)
		return -1;

	/* The reply: one or more fragments; a NULL reply is small, anything over 4 KiB is wrong. */
	unsigned char reply[4096];
	size_t have = 0;
	for (int fragments = 0; fragments < 16; fragments++) {
		unsigned char mark[4];
		if (read_all(fd, mark, 4) < 0)
			return -1;
		uint32_t m = get32(mark), len = m & 0x7fffffffu;
		if (len > sizeof reply - have)
			return -1;
		if (read_all(fd, reply + have, len) < 0)
			return -1;
		have += len;
		if (m & 0x80000000u)
			goto whole;
	}
	return -1;
whole:
	/* xid, REPLY, MSG_ACCEPTED, verifier (flavor, length, body), accept_stat */
	if (have < 24 || get32(reply) != xid || get32(reply + 4) != 1 || get32(reply + 8) != 0)
		return -1;
	uint32_t verf_len = get32(reply + 16);
	if (verf_len > 400)
		return -1;
	size_t at = 20 + ((verf_len + 3) & ~3u);
	if (have < at + 4 || get32(reply + at) != 0)
		return -1;
	return 0;
}

/* n round trips on this thread's connection; 0 or -EIO. */
static int round_trips(int n)
{
	for (int i = 0; i < n; i++) {
		if (conn_fd < 0) {
			conn_fd = conn_open();
			if (conn_fd < 0)
				return -EIO;
			next_xid = (uint32_t)(uintptr_t)&conn_fd ^ (uint32_t)time(NULL);
		}
		if (null_call(conn_fd, ++next_xid) < 0) {
			close(conn_fd);
			conn_fd = -1;
			return -EIO;
		}
	}
	return 0;
}

/* ---- the passthrough ---------------------------------------------------------------------- */

/* "/a/b" -> "a/b", "/" -> "." : relative to src_fd. */
static const char *rel(const char *path)
{
	return path[1] == 0 ? "." : path + 1;
}

#define CHECK(expr) ((expr) == -1 ? -errno : 0)

static void *ff_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	cfg->readdir_ino = 1;
	return NULL;
}

static int ff_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	if (fi != NULL)
		return CHECK(fstat((int)fi->fh, st));
	return CHECK(fstatat(src_fd, rel(path), st, AT_SYMLINK_NOFOLLOW));
}

static int ff_readlink(const char *path, char *buf, size_t size)
{
	ssize_t n = readlinkat(src_fd, rel(path), buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

static int ff_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	int fd = openat(src_fd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *dp = fdopendir(fd);
	if (dp == NULL) {
		int e = errno;
		close(fd);
		return -e;
	}
	int res = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(dp);
		if (de == NULL) {
			res = -errno;
			break;
		}
		struct stat st;
		memset(&st, 0, sizeof st);
		st.st_ino = de->d_ino;
		st.st_mode = (mode_t)de->d_type << 12;
		/* offset 0: the whole directory in one call, as bindfs does */
		if (filler(buf, de->d_name, &st, 0, 0) != 0) {
			res = -EIO;
			break;
		}
	}
	closedir(dp);
	return res;
}

static int ff_mknod(const char *path, mode_t mode, dev_t rdev)
{
	return CHECK(mknodat(src_fd, rel(path), mode, rdev));
}

static int ff_mkdir(const char *path, mode_t mode)
{
	return CHECK(mkdirat(src_fd, rel(path), mode));
}

static int ff_unlink(const char *path)
{
	int r = round_trips(opts.rtt_unlink);
	return r ? r : CHECK(unlinkat(src_fd, rel(path), 0));
}

static int ff_rmdir(const char *path)
{
	int r = round_trips(opts.rtt_rmdir);
	return r ? r : CHECK(unlinkat(src_fd, rel(path), AT_REMOVEDIR));
}

static int ff_symlink(const char *target, const char *path)
{
	return CHECK(symlinkat(target, src_fd, rel(path)));
}

static int ff_rename(const char *from, const char *to, unsigned int flags)
{
	return CHECK(renameat2(src_fd, rel(from), src_fd, rel(to), flags));
}

static int ff_link(const char *from, const char *to)
{
	return CHECK(linkat(src_fd, rel(from), src_fd, rel(to), 0));
}

static int ff_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (fi != NULL)
		return CHECK(fchmod((int)fi->fh, mode));
	return CHECK(fchmodat(src_fd, rel(path), mode, 0));
}

static int ff_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	if (fi != NULL)
		return CHECK(fchown((int)fi->fh, uid, gid));
	return CHECK(fchownat(src_fd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int ff_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (fi != NULL)
		return CHECK(ftruncate((int)fi->fh, size));
	int fd = openat(src_fd, rel(path), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = CHECK(ftruncate(fd, size));
	close(fd);
	return r;
}

static int ff_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	if (fi != NULL)
		return CHECK(futimens((int)fi->fh, tv));
	return CHECK(utimensat(src_fd, rel(path), tv, AT_SYMLINK_NOFOLLOW));
}

static int ff_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int fd = openat(src_fd, rel(path), (fi->flags & ~O_DIRECT) | O_CREAT | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int ff_open(const char *path, struct fuse_file_info *fi)
{
	int r = round_trips(opts.rtt_open);
	if (r)
		return r;
	int fd = openat(src_fd, rel(path), (fi->flags & ~O_DIRECT) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int ff_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)path;
	int r = round_trips(opts.rtt_read);
	if (r)
		return r;
	ssize_t n = pread((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int ff_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)path;
	ssize_t n = pwrite((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int ff_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return CHECK(fstatvfs(src_fd, st));
}

static int ff_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int ff_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	return CHECK(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static const struct fuse_operations ff_ops = {
	.init = ff_init,
	.getattr = ff_getattr,
	.readlink = ff_readlink,
	.readdir = ff_readdir,
	.mknod = ff_mknod,
	.mkdir = ff_mkdir,
	.unlink = ff_unlink,
	.rmdir = ff_rmdir,
	.symlink = ff_symlink,
	.rename = ff_rename,
	.link = ff_link,
	.chmod = ff_chmod,
	.chown = ff_chown,
	.truncate = ff_truncate,
	.utimens = ff_utimens,
	.create = ff_create,
	.open = ff_open,
	.read = ff_read,
	.write = ff_write,
	.statfs = ff_statfs,
	.release = ff_release,
	.fsync = ff_fsync,
};

/* ---- ping --------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int ping(long n, const char *addr)
{
	if (n <= 0 || n > 10000000) {
		fprintf(stderr, "floorfs: --ping N wants 1..10000000 calls\n");
		return 2;
	}
	if (parse_addr(addr, &server_addr) < 0) {
		fprintf(stderr, "floorfs: bad address %s (want IPv4:PORT)\n", addr);
		return 2;
	}
	uint64_t *t = malloc(sizeof *t * (size_t)n);
	if (t == NULL)
		return 1;
	if (round_trips(200) < 0) {
		fprintf(stderr, "floorfs: NULL calls to %s failed\n", addr);
		return 1;
	}
	for (long i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		if (round_trips(1) < 0) {
			fprintf(stderr, "floorfs: NULL call %ld to %s failed\n", i, addr);
			return 1;
		}
		t[i] = now_ns() - t0;
	}
	double sum = 0;
	for (long i = 0; i < n; i++)
		sum += (double)t[i];
	qsort(t, (size_t)n, sizeof *t, cmp_u64);
	printf("calls %ld p50_us %.1f p90_us %.1f p99_us %.1f mean_us %.1f\n", n,
	       t[n / 2] / 1e3, t[n * 9 / 10] / 1e3, t[n * 99 / 100] / 1e3, sum / n / 1e3);
	free(t);
	return 0;
}

/* ---- main --------------------------------------------------------------------------------- */

static int take_source(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	(void)data;
	(void)outargs;
	if (key == FUSE_OPT_KEY_NONOPT && src_fd < 0) {
		src_fd = open(arg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (src_fd < 0) {
			fprintf(stderr, "floorfs: cannot open source directory %s: %s\n", arg,
				strerror(errno));
			exit(1);
		}
		return 0; /* consumed: the next non-option is the mount point */
	}
	return 1;
}

int main(int argc, char *argv[])
{
	if (argc >= 2 && strcmp(argv[1], "--ping") == 0) {
		if (argc != 4) {
			fprintf(stderr, "usage: floorfs --ping N HOST:PORT\n");
			return 2;
		}
		return ping(strtol(argv[2], NULL, 10), argv[3]);
	}
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	if (fuse_opt_parse(&args, &opts, option_spec, take_source) == -1)
		return 2;
	if (src_fd < 0) {
		fprintf(stderr, "usage: floorfs SRC MOUNTPOINT [-o rtt_server=HOST:PORT,rtt_open=N,"
				"rtt_read=N,rtt_unlink=N,rtt_rmdir=N] [FUSE options]\n"
				"       floorfs --ping N HOST:PORT\n");
		return 2;
	}
	int any = opts.rtt_open | opts.rtt_read | opts.rtt_unlink | opts.rtt_rmdir;
	if (opts.rtt_open < 0 || opts.rtt_read < 0 || opts.rtt_unlink < 0 || opts.rtt_rmdir < 0 ||
	    opts.rtt_open > 1000 || opts.rtt_read > 1000 || opts.rtt_unlink > 1000 ||
	    opts.rtt_rmdir > 1000) {
		fprintf(stderr, "floorfs: rtt_* counts must be 0..1000\n");
		return 2;
	}
	if (any && (opts.rtt_server == NULL || parse_addr(opts.rtt_server, &server_addr) < 0)) {
		fprintf(stderr, "floorfs: round trips need -o rtt_server=IPv4:PORT\n");
		return 2;
	}
	/* Fail now, not at the first open, if the server does not answer. */
	if (any && round_trips(1) < 0) {
		fprintf(stderr, "floorfs: no NULL reply from %s\n", opts.rtt_server);
		return 1;
	}
	if (conn_fd >= 0) {
		close(conn_fd);
		conn_fd = -1;
	}
	/* as bindfs: the kernel checks permissions from the attributes getattr returns */
	fuse_opt_add_arg(&args, "-odefault_permissions");
	int r = fuse_main(args.argc, args.argv, &ff_ops, NULL);
	fuse_opt_free_args(&args);
	return r;
}
