/* diskguard.c: see diskguard.h. */
#include "diskguard.h"

#include <stdio.h>
#include <sys/statvfs.h>
#include <time.h>

#include "log.h"

/* Free bytes for an unprivileged writer; UINT64_MAX when unknown (a
 * failing statvfs must not stop a node that may well have room). */
static uint64_t free_now(struct diskguard *g)
{
	struct statvfs sv;
	g->reads++;
	if (statvfs(g->path, &sv) != 0)
		return UINT64_MAX;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

void diskguard_init(struct diskguard *g, struct timebase *tb, const char *path, uint64_t reserve)
{
	*g = (struct diskguard){.path = path, .reserve = reserve, .tb = tb};
	g->free_bytes = free_now(g);
	g->checked_ms = timebase_now(tb);
}

bool diskguard_full(struct diskguard *g)
{
	if (g->reserve == 0)
		return false; /* the guard is off */
	uint64_t now = timebase_now(g->tb);
	if (now - g->checked_ms < DISKGUARD_CHECK_MS)
		return g->full;
	g->checked_ms = now;
	g->free_bytes = free_now(g);
	bool full = g->free_bytes < g->reserve;
	if (full != g->full)
		log_warn(full ? "disk full: %llu MB free under %s, below disk-reserve-mb %llu: "
				"refusing new sessions, locks and rules until there is room"
			      : "disk space back: %llu MB free under %s (disk-reserve-mb %llu): "
				"accepting every write again",
			 (unsigned long long)(g->free_bytes >> 20), g->path,
			 (unsigned long long)(g->reserve >> 20));
	g->full = full;
	return full;
}

void diskguard_refusal(struct diskguard *g, uint64_t node_id, char *msg, size_t len)
{
	g->refusals++;
	snprintf(msg, len,
		 "disk full on node %llu: %llu MB free, below its disk-reserve-mb %llu; new "
		 "sessions, locks and rules are refused until there is room (releases, closes "
		 "and renewals go on)",
		 (unsigned long long)node_id, (unsigned long long)(g->free_bytes >> 20),
		 (unsigned long long)(g->reserve >> 20));
}

void diskguard_wait_room(struct diskguard *g, uint64_t need, uint64_t index)
{
	uint64_t have = free_now(g);
	if (have >= need)
		return;
	g->apply_waits++;
	char why[256];
	snprintf(why, sizeof why,
		 "disk full: applying entry %llu needs about %llu KB, %llu KB free under %s: "
		 "waiting for space (nothing is served meanwhile)",
		 (unsigned long long)index, (unsigned long long)(need >> 10),
		 (unsigned long long)(have >> 10), g->path);
	log_error("%s", why);
	struct timespec ts = {0, DISKGUARD_CHECK_MS * 1000000L};
	do {
		if (g->on_wait != NULL)
			g->on_wait(g->on_wait_arg, why);
		nanosleep(&ts, NULL);
	} while ((have = free_now(g)) < need);
	log_warn("disk space back (%llu KB free): applying entry %llu",
		 (unsigned long long)(have >> 10), (unsigned long long)index);
}
