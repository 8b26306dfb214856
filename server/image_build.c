/* image_build.c: see image_build.h. */
#include "image_build.h"

#include <stdlib.h>
#include <unistd.h>

#include "feature_level.h"
#include "image_pack.h"
#include "log.h"
#include "raftlock.h"

void image_build_init(struct image_build *b, uv_loop_t *loop, struct store *store)
{
	*b = (struct image_build){.loop = loop, .store = store};
	atomic_init(&b->stop, false);
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cond, NULL);
	b->work.data = b;
}

static void build_work(uv_work_t *w)
{
	struct image_build *b = w->data;
	if (b->delay_ms != 0) /* entries applied meanwhile make the tail */
		usleep(b->delay_ms * 1000u);
	if (b->packed) {
		b->rv = image_pack_at(b->store, b->txn, raft_malloc, raft_free, &b->stop, &b->image,
				      &b->image_len, &b->raw_len);
	} else {
		b->rv = store_dump_at(b->store, b->txn, raft_malloc, raft_free, &b->stop, &b->image,
				      &b->image_len);
		b->raw_len = b->image_len;
	}
	mdb_txn_abort(b->txn); /* a read transaction: ended on any thread (MDB_NOTLS) */
	pthread_mutex_lock(&b->mu);
	b->worker_done = true;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

static void drop(struct image_build *b)
{
	raft_free(b->image);
	b->image = NULL;
	snapshot_tail_reset(&b->tail);
	b->state = IMAGE_BUILD_IDLE;
}

static void build_done(uv_work_t *w, int status)
{
	struct image_build *b = w->data;
	if (b->closed)
		return; /* image_build_close() freed it all */
	b->txn = NULL;
	b->dump_ns = uv_hrtime() - b->started_ns;
	if (status != 0 || b->rv != 0 || b->discard || b->spoilt) {
		if (b->rv == RAFTLOCK_ENOMEM)
			log_warn(
				"snapshot image at %llu: out of memory; the next snapshot is taken "
				"on the loop",
				(unsigned long long)b->image_index);
		/* lost for want of memory or map: not by a restore's discard */
		b->failed = b->failed || b->spoilt || b->rv == RAFTLOCK_ENOMEM ||
			    (b->rv == RAFTLOCK_EUNAVAILABLE && !b->discard);
		drop(b);
		return;
	}
	b->state = IMAGE_BUILD_READY;
	log_debug("snapshot image at %llu built off the loop: %zu bytes (%zu unpacked) in %.1f ms",
		  (unsigned long long)b->image_index, b->image_len, b->raw_len,
		  (double)b->dump_ns / 1e6);
}

int image_build_start(struct image_build *b)
{
	if (b->state != IMAGE_BUILD_IDLE)
		return RAFTLOCK_EINTERNAL;
	MDB_txn *txn = store_begin(b->store, false);
	Raftlock__Meta *m = store_get_meta(b->store, txn);
	b->image_index = m->applied_index;
	/* the level of the state dumped, which every voter runs */
	b->packed = features_recorded(m->feature_level) >= FEATURES_PACKED_IMAGE;
	raftlock__meta__free_unpacked(m, NULL);
	b->txn = txn;
	b->image = NULL;
	b->rv = 0;
	b->notes = 0;
	b->discard = b->spoilt = false;
	b->worker_done = false;
	atomic_store(&b->stop, false);
	snapshot_tail_reset(&b->tail);
	b->started_ns = uv_hrtime();
	if (uv_queue_work(b->loop, &b->work, build_work, build_done) != 0) {
		store_abort(txn);
		b->txn = NULL;
		return RAFTLOCK_EINTERNAL;
	}
	b->state = IMAGE_BUILD_RUNNING;
	return 0;
}

bool image_build_failed(const struct image_build *b)
{
	return b->failed;
}

void image_build_fallback_done(struct image_build *b)
{
	b->failed = false;
}

void image_build_note(struct image_build *b, uint64_t index, const void *buf, size_t len)
{
	if (b->state == IMAGE_BUILD_IDLE || b->spoilt || b->discard || index <= b->image_index)
		return;
	if (snapshot_tail_add(&b->tail, index, buf, len) != 0) {
		log_warn(
			"snapshot tail: out of memory at entry %llu; this build is dropped and the "
			"next snapshot taken on the loop",
			(unsigned long long)index);
		b->spoilt = true;
	} else if (b->state == IMAGE_BUILD_RUNNING && ++b->notes % 64 == 0 &&
		   store_map_filling(b->store)) {
		log_warn(
			"snapshot image at %llu: the store's file passed 3/4 of its map while the "
			"dump held its pages; dump stopped, the next snapshot is taken on the loop",
			(unsigned long long)b->image_index);
		atomic_store(&b->stop, true);
		b->spoilt = true;
	}
	if (b->spoilt) {
		b->failed = true;
		if (b->state == IMAGE_BUILD_READY)
			drop(b);
	}
}

int image_build_take(struct image_build *b, struct raft_buffer **bufs, unsigned *n_bufs)
{
	struct raft_buffer *v = raft_malloc(2 * sizeof *v);
	if (v == NULL || snapshot_tail_finish(&b->tail, raft_malloc, &v[1].base, &v[1].len) != 0) {
		raft_free(v);
		drop(b);
		return RAFTLOCK_ENOMEM;
	}
	v[0].base = b->image;
	v[0].len = b->image_len;
	b->image = NULL;
	b->state = IMAGE_BUILD_IDLE;
	*bufs = v;
	*n_bufs = 2;
	return 0;
}

void image_build_discard(struct image_build *b)
{
	if (b->state == IMAGE_BUILD_RUNNING) {
		atomic_store(&b->stop, true);
		b->discard = true;
		snapshot_tail_reset(&b->tail);
	} else if (b->state == IMAGE_BUILD_READY) {
		drop(b);
	}
}

void image_build_close(struct image_build *b)
{
	image_build_discard(b);
	if (b->state == IMAGE_BUILD_RUNNING) {
		pthread_mutex_lock(&b->mu);
		while (!b->worker_done)
			pthread_cond_wait(&b->cond, &b->mu);
		pthread_mutex_unlock(&b->mu);
		raft_free(b->image); /* the worker's, if it made one */
		b->image = NULL;
		b->state = IMAGE_BUILD_IDLE;
	}
	b->closed = true;
	snapshot_tail_free(&b->tail);
}
