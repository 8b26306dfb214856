/* io_timing.c: see io_timing.h. */
#include "io_timing.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct slot {
	struct raft_io_append *req; /* NULL: free */
	struct io_timing *t;
	raft_io_append_cb cb;
	uint64_t start_ns;
};

static struct slot slots[IO_TIMING_SLOTS];

static size_t home(const struct raft_io_append *req)
{
	uintptr_t p = (uintptr_t)req;
	return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> 52) % IO_TIMING_SLOTS;
}

/* Open addressing with backward-shift deletion: no tombstones. */
static struct slot *slot_find(const struct raft_io_append *req)
{
	for (size_t i = home(req), k = 0; k < IO_TIMING_SLOTS; i = (i + 1) % IO_TIMING_SLOTS, k++) {
		if (slots[i].req == req)
			return &slots[i];
		if (slots[i].req == NULL)
			return NULL;
	}
	return NULL;
}

static struct slot *slot_claim(struct raft_io_append *req)
{
	for (size_t i = home(req), k = 0; k < IO_TIMING_SLOTS; i = (i + 1) % IO_TIMING_SLOTS, k++)
		if (slots[i].req == NULL)
			return &slots[i];
	return NULL;
}

static void slot_release(struct slot *s)
{
	size_t i = (size_t)(s - slots);
	slots[i].req = NULL;
	for (size_t j = (i + 1) % IO_TIMING_SLOTS; slots[j].req != NULL;
	     j = (j + 1) % IO_TIMING_SLOTS) {
		size_t h = home(slots[j].req);
		/* Move j back into the hole at i unless its home lies in (i, j]. */
		bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
		if (stays)
			continue;
		slots[i] = slots[j];
		slots[j].req = NULL;
		i = j;
	}
}

static void timed_cb(struct raft_io_append *req, int status)
{
	struct slot *s = slot_find(req);
	/* Always found: only requests with a slot get this callback. */
	raft_io_append_cb cb = s->cb;
	histogram_observe(&s->t->writes, uv_hrtime() - s->start_ns);
	slot_release(s);
	cb(req, status);
}

void io_timing_wrap(struct io_timing *t, struct raft_io *io,
		    int (*wrapper)(struct raft_io *io, struct raft_io_append *req,
				   const struct raft_entry entries[], unsigned n,
				   raft_io_append_cb cb))
{
	t->append = io->append;
	histogram_init(&t->writes, &histogram_latency);
	t->untimed = 0;
	io->append = wrapper;
}

int io_timing_append(struct io_timing *t, struct raft_io *io, struct raft_io_append *req,
		     const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
	struct slot *s = slot_claim(req);
	if (s == NULL) {
		t->untimed++;
		return t->append(io, req, entries, n, cb);
	}
	*s = (struct slot){req, t, cb, uv_hrtime()};
	int rv = t->append(io, req, entries, n, timed_cb);
	if (rv != 0) {
		struct slot *mine = slot_find(req);
		if (mine != NULL)
			slot_release(mine);
	}
	return rv;
}
