/* quota.c — CPUs usable by this process: affinity and cgroup quota (see
 * quota.h). */
#include "kernels/cpu/quota.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ceil(quota / period) CPUs; 0 for no limit or nonsense */
static int cpus_of(long long quota, long long period)
{
    if (quota <= 0 || period <= 0)
        return 0;
    long long n = (quota + period - 1) / period;
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* The first line of dir/name; 0 when it cannot be read. */
static int read_line(const char *dir, const char *name, char *buf, size_t size)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    return ok;
}

/* cgroup v2: cpu.max holds "QUOTA PERIOD", QUOTA being "max" for none. */
static int limit_v2(const char *dir)
{
    char line[128];
    long long quota, period;
    if (!read_line(dir, "cpu.max", line, sizeof(line)) || sscanf(line, "%lld %lld", &quota, &period) != 2)
        return 0;
    return cpus_of(quota, period);
}

/* cgroup v1: cpu.cfs_quota_us (-1 for none) over cpu.cfs_period_us. */
static int limit_v1(const char *dir)
{
    char q[64], p[64];
    if (!read_line(dir, "cpu.cfs_quota_us", q, sizeof(q)) || !read_line(dir, "cpu.cfs_period_us", p, sizeof(p)))
        return 0;
    return cpus_of(strtoll(q, NULL, 10), strtoll(p, NULL, 10));
}

/* The smallest limit on the directories base/path, base/parent of path, ...,
 * base itself.  Inside a container the path named by /proc/self/cgroup is
 * often not under the mount (it is the mount), so missing levels are
 * skipped. */
static int limit_along(const char *base, const char *path, int (*limit)(const char *dir))
{
    char rel[PATH_MAX], dir[PATH_MAX];
    if (snprintf(rel, sizeof(rel), "%s", path) >= (int)sizeof(rel))
        return 0;
    int best = 0;
    for (;;) {
        size_t len = strlen(rel);
        while (len && rel[len - 1] == '/')
            rel[--len] = '\0';
        if (snprintf(dir, sizeof(dir), "%s%s", base, rel) < (int)sizeof(dir)) {
            int l = limit(dir);
            if (l && (!best || l < best))
                best = l;
        }
        char *slash = strrchr(rel, '/');
        if (!len || !slash)
            return best;
        *slash = '\0';
    }
}

/* Whether a v1 controller list ("cpu,cpuacct") names the cpu controller. */
static int names_cpu(const char *list, size_t len)
{
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && list[j] != ',')
            j++;
        if (j - i == 3 && !strncmp(list + i, "cpu", 3))
            return 1;
        i = j + 1;
    }
    return 0;
}

/* One line of /proc/self/cgroup, "ID:CONTROLLERS:PATH": v2's has no
 * controllers, v1's cpu hierarchy is mounted under its list's name. */
static int limit_of_line(const char *root, const char *line, size_t len)
{
    const char *c1 = memchr(line, ':', len);
    const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    if (!c2)
        return 0;
    char path[PATH_MAX], base[PATH_MAX];
    size_t plen = len - (size_t)(c2 + 1 - line), clen = (size_t)(c2 - c1 - 1);
    if (plen >= sizeof(path))
        return 0;
    memcpy(path, c2 + 1, plen);
    path[plen] = '\0';
    if (clen == 0)
        return limit_along(root, path, limit_v2);
    if (!names_cpu(c1 + 1, clen) || snprintf(base, sizeof(base), "%s/%.*s", root, (int)clen, c1 + 1) >= (int)sizeof(base))
        return 0;
    return limit_along(base, path, limit_v1);
}

int tram_cgroup_cpu_limit(const char *root, const char *self_cgroup)
{
    int best = 0;
    for (const char *line = self_cgroup; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int l = limit_of_line(root, line, len);
        if (l && (!best || l < best))
            best = l;
        line = end ? end + 1 : NULL;
    }
    return best;
}

int tram_cpu_usable(void)
{
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    char text[4096];
    FILE *f = fopen("/proc/self/cgroup", "r");
    size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    int quota = tram_cgroup_cpu_limit("/sys/fs/cgroup", text);
    if (quota && (!cpus || quota < cpus))
        cpus = quota;
    return cpus > 0 ? cpus : 1;
}
