/* quota.h — how many CPUs this process may really use: the CPUs of its
 * affinity mask (taskset, a cpuset), capped by a cgroup CPU quota (a
 * Kubernetes CPU limit, docker --cpus).  A quota does not hide cores: the
 * process still sees them all, but a pool with more threads than the quota
 * has them descheduled in turn, each stalling the others, so the default
 * thread count follows the quota. */
#ifndef TRAM_CPU_QUOTA_H
#define TRAM_CPU_QUOTA_H

/* The quota in CPUs, rounded up, that the cgroup files under `root` set for
 * the cgroup named in `self_cgroup` (the text of /proc/self/cgroup): v2's
 * cpu.max ("QUOTA PERIOD" or "max PERIOD"), v1's cpu.cfs_quota_us and
 * cpu.cfs_period_us (-1: none), the smallest along the path from the cgroup
 * up to the root (a parent's limit holds its children).  0 when nothing
 * limits it, or nothing can be read. */
int tram_cgroup_cpu_limit(const char *root, const char *self_cgroup);

/* CPUs usable here: sched_getaffinity's count, capped by the quota of
 * /sys/fs/cgroup for /proc/self/cgroup; at least 1. */
int tram_cpu_usable(void);

#endif
