/*
 * test_record_peek.c: record_peek_lock_timed() tells a LockRecord that may
 * hold a timer from one that does not, from its bytes alone: every kind
 * of timer is seen (a lock-delay, a waiter, a holder's revocation time,
 * among other holders and fields), a record without one is passed over,
 * and bytes it cannot read are left to the decoder. record_peek_lock_queued()
 * sees a waiter and nothing else. record_peek_lock_parties() visits the
 * holders and waiters with their session, owner, seq and set mark, and
 * calls unreadable only bytes the decoder refuses too.
 * record_peek_lock_name() finds the name the decoder finds.
 * record_peek_outcome_marks() reads an Outcome's pending and queued marks
 * as the decoder does, or says it cannot.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "raftlock.pb-c.h"
#include "record_peek.h"

static uint8_t buf[4096];

static size_t pack(const Raftlock__LockRecord *rec)
{
	size_t n = raftlock__lock_record__get_packed_size(rec);
	assert_true(n <= sizeof buf);
	assert_int_equal(raftlock__lock_record__pack(rec, buf), n);
	return n;
}

/* A held lock as most are: a name, a holder with its token and times, a
 * value, the creator's hold limits at zero. */
static void held(Raftlock__LockRecord *rec, Raftlock__Holder *h, Raftlock__Holder **hs)
{
	raftlock__lock_record__init(rec);
	raftlock__holder__init(h);
	rec->name = "app/orders/42";
	rec->kind = RAFTLOCK__LOCK_KIND__MUTEX;
	rec->lock_delay_ms = 100;
	h->session = 77;
	h->owner = 3;
	h->token = 123456789;
	h->granted_index = 1000;
	h->granted_time = 1700000000000ull;
	h->count = 1;
	h->value = "leader-a";
	h->release_requested = true;
	hs[0] = h;
	rec->n_holders = 1;
	rec->holders = hs;
}

static void test_held_lock_without_timer_passed_over(void **state)
{
	(void)state;
	Raftlock__LockRecord rec;
	Raftlock__Holder h, *hs[2];
	held(&rec, &h, hs);
	assert_false(record_peek_lock_timed(buf, pack(&rec)));
	rec.n_holders = 0; /* a lock no one holds, kept for its delay setting */
	assert_false(record_peek_lock_timed(buf, pack(&rec)));
	assert_false(record_peek_lock_timed(buf, 0));
}

static void test_every_timer_seen(void **state)
{
	(void)state;
	Raftlock__LockRecord rec;
	Raftlock__Holder h, h2, *hs[2];
	held(&rec, &h, hs);
	rec.delay_until = 5;
	assert_true(record_peek_lock_timed(buf, pack(&rec)));

	held(&rec, &h, hs);
	h.revoke_at = 1;
	assert_true(record_peek_lock_timed(buf, pack(&rec)));

	/* The second of two holders, behind a large one. */
	held(&rec, &h, hs);
	raftlock__holder__init(&h2);
	h2.session = 1;
	h2.revoke_at = 1ull << 62;
	hs[1] = &h2;
	rec.n_holders = 2;
	rec.kind = RAFTLOCK__LOCK_KIND__SEMAPHORE;
	assert_true(record_peek_lock_timed(buf, pack(&rec)));
	h2.revoke_at = 0;
	assert_false(record_peek_lock_timed(buf, pack(&rec)));

	/* A waiter, with or without a deadline. */
	held(&rec, &h, hs);
	Raftlock__Waiter w, *ws[1] = {&w};
	raftlock__waiter__init(&w);
	w.session = 9;
	rec.n_waiters = 1;
	rec.waiters = ws;
	assert_true(record_peek_lock_timed(buf, pack(&rec)));
}

/* No timer in what the decoder makes of the bytes. */
static bool decodes_untimed(const uint8_t *p, size_t n)
{
	Raftlock__LockRecord *rec = raftlock__lock_record__unpack(NULL, n, p);
	if (rec == NULL)
		return false;
	bool timed = rec->delay_until != 0 || rec->n_waiters != 0;
	for (size_t i = 0; i < rec->n_holders; i++)
		timed = timed || rec->holders[i]->revoke_at != 0;
	raftlock__lock_record__free_unpacked(rec, NULL);
	return !timed;
}

static void test_unreadable_bytes_left_to_the_decoder(void **state)
{
	(void)state;
	Raftlock__LockRecord rec;
	Raftlock__Holder h, *hs[2];
	held(&rec, &h, hs);
	h.revoke_at = 99;
	size_t n = pack(&rec);
	/* Cut anywhere: "no timer" only where the decoder agrees. */
	unsigned passed = 0;
	for (size_t k = 0; k <= n; k++) {
		if (!record_peek_lock_timed(buf, k)) {
			assert_true(decodes_untimed(buf, k));
			passed++;
		}
	}
	assert_true(passed > 0 && passed < n / 2);
	static const uint8_t bad_wire[] = {0x0f, 0x01}; /* field 1, wire type 7 */
	static const uint8_t long_len[] = {0x22, 0x7f}; /* holders: 127 bytes, none here */
	static const uint8_t endless[] = {0x30, 0xff, 0xff, 0xff, 0xff, 0xff,
					  0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	assert_true(record_peek_lock_timed(bad_wire, sizeof bad_wire));
	assert_true(record_peek_lock_timed(long_len, sizeof long_len));
	assert_true(record_peek_lock_timed(endless, sizeof endless));
}

/* record_peek_lock_queued() sees a waiter wherever it is, and nothing
 * else: holders, delays and unreadable bytes are no queue; a holder of the
 * asking session is no queue for it. */
static void test_queue_seen(void **state)
{
	(void)state;
	Raftlock__LockRecord rec;
	Raftlock__Holder h, *hs[2];
	held(&rec, &h, hs);
	rec.delay_until = 5;
	h.revoke_at = 7;
	assert_false(record_peek_lock_queued(buf, pack(&rec), 1));
	Raftlock__Waiter w1, w2, *ws[2] = {&w1, &w2};
	raftlock__waiter__init(&w1);
	raftlock__waiter__init(&w2);
	w1.session = 9;
	w2.session = 10;
	rec.waiters = ws;
	for (size_t n = 1; n <= 2; n++) {
		rec.n_waiters = n;
		size_t len = pack(&rec);
		assert_true(record_peek_lock_queued(buf, len, 1));
		/* Cut before the first waiter ends: no waiter read. */
		unsigned seen = 0;
		for (size_t k = 0; k < len; k++)
			seen += record_peek_lock_queued(buf, k, 1);
		assert_true(seen > 0 && seen < len);
	}
	/* Not for the holder's session (h.session, 77): its acquire nests. */
	rec.n_waiters = 1;
	assert_false(record_peek_lock_queued(buf, pack(&rec), 77));
	rec.n_holders = 0;
	assert_true(record_peek_lock_queued(buf, pack(&rec), 1));
	assert_true(record_peek_lock_queued(buf, pack(&rec), 77));
	static const uint8_t bad_wire[] = {0x0f, 0x01};
	static const uint8_t waiters_varint[] = {0x28, 0x01}; /* field 5 as a varint */
	assert_false(record_peek_lock_queued(bad_wire, sizeof bad_wire, 1));
	assert_false(record_peek_lock_queued(waiters_varint, sizeof waiters_varint, 1));
	assert_false(record_peek_lock_queued(buf, 0, 1));
}

/* What record_peek_lock_parties() visited: "h" (holder), "w" (waiter) or
 * "m" (a set's waiter), then "session/owner", a waiter's ":seq". */
struct visited {
	char text[128];
};

static void note_visit(void *arg, const struct record_party *p)
{
	struct visited *v = arg;
	size_t at = strlen(v->text);
	at += (size_t)snprintf(v->text + at, sizeof v->text - at, "%s%s%llu/%llu", at ? " " : "",
			       !p->waiter ? "h"
			       : p->multi ? "m"
					  : "w",
			       (unsigned long long)p->session, (unsigned long long)p->owner);
	if (p->waiter)
		snprintf(v->text + at, sizeof v->text - at, ":%llu", (unsigned long long)p->seq);
}

static void test_parties_seen(void **state)
{
	(void)state;
	Raftlock__LockRecord rec;
	Raftlock__Holder h, *hs[2];
	held(&rec, &h, hs);
	Raftlock__Waiter w[4], *ws[4];
	for (int i = 0; i < 4; i++) {
		raftlock__waiter__init(&w[i]);
		w[i].session = 9 + (uint64_t)i;
		w[i].owner = 2;
		w[i].seq = 100 + (uint64_t)i;
		w[i].deadline = 1ull << 40;
		w[i].value = "v";
		ws[i] = &w[i];
	}
	w[1].multi = w[3].multi = true;
	w[2].owner = 5;
	rec.waiters = ws;
	rec.n_waiters = 4;
	size_t n = pack(&rec);
	struct visited v = {""};
	assert_true(record_peek_lock_parties(buf, n, note_visit, &v));
	assert_string_equal(v.text,
			    "h77/3 w9/2:100 m10/2:101 w11/5:102 m12/2:103"); /* queue order */
	/* Cut anywhere: unreadable only where the decoder refuses too. */
	unsigned refused = 0;
	for (size_t k = 0; k <= n; k++) {
		v.text[0] = '\0';
		if (record_peek_lock_parties(buf, k, note_visit, &v))
			continue;
		Raftlock__LockRecord *cut = raftlock__lock_record__unpack(NULL, k, buf);
		assert_null(cut);
		refused++;
	}
	assert_true(refused > n / 2);
	v.text[0] = '\0';
	assert_true(record_peek_lock_parties(buf, 0, note_visit, &v));
	assert_string_equal(v.text, "");
	static const uint8_t bad_wire[] = {0x0f, 0x01};
	static const uint8_t waiters_varint[] = {0x28, 0x01};         /* field 5 as a varint */
	static const uint8_t bad_waiter[] = {0x2a, 0x02, 0x08, 0xff}; /* a waiter cut short */
	assert_false(record_peek_lock_parties(bad_wire, sizeof bad_wire, note_visit, &v));
	assert_false(
		record_peek_lock_parties(waiters_varint, sizeof waiters_varint, note_visit, &v));
	assert_false(record_peek_lock_parties(bad_waiter, sizeof bad_waiter, note_visit, &v));
	assert_null(raftlock__lock_record__unpack(NULL, sizeof bad_waiter, bad_waiter));
}

/* record_peek_lock_name() reads the name as the decoder does: the
 * record's own, none for a record without one, the last of two; bytes
 * it cannot read are not a name. */
static void test_name_seen(void **state)
{
	(void)state;
	Raftlock__LockRecord rec;
	Raftlock__Holder h, *hs[1];
	held(&rec, &h, hs);
	size_t n = pack(&rec), len;
	const char *name;
	assert_true(record_peek_lock_name(buf, n, &name, &len));
	assert_int_equal(len, strlen("app/orders/42"));
	assert_memory_equal(name, "app/orders/42", len);
	rec.name = "";
	n = pack(&rec);
	assert_true(record_peek_lock_name(buf, n, &name, &len));
	assert_int_equal(len, 0);
	static const uint8_t twice[] = {0x0a, 0x01, 'a', 0x0a, 0x02, 'b', 'c'};
	assert_true(record_peek_lock_name(twice, sizeof twice, &name, &len));
	Raftlock__LockRecord *dec = raftlock__lock_record__unpack(NULL, sizeof twice, twice);
	assert_non_null(dec);
	assert_int_equal(len, strlen(dec->name));
	assert_memory_equal(name, dec->name, len);
	raftlock__lock_record__free_unpacked(dec, NULL);
	static const uint8_t cut[] = {0x0a, 0x05, 'a'};
	assert_false(record_peek_lock_name(cut, sizeof cut, &name, &len));
}

/* The marks of n bytes as the decoder reads them; false when it refuses. */
static bool decoded_marks(const uint8_t *b, size_t n, bool *pending, bool *queued)
{
	Raftlock__Outcome *o = raftlock__outcome__unpack(NULL, n, b);
	if (o == NULL)
		return false;
	*pending = o->pending;
	*queued = o->queued;
	raftlock__outcome__free_unpacked(o, NULL);
	return true;
}

/* Every combination of the marks, beside a result, reads as decoded; so
 * does every cut the look can read, and a field given twice (the last
 * counts); a mark of another wire type is left to the decoder. */
static void test_outcome_marks_as_decoded(void **state)
{
	(void)state;
	for (int k = 0; k < 4; k++) {
		Raftlock__Outcome o = RAFTLOCK__OUTCOME__INIT;
		Raftlock__Result r = RAFTLOCK__RESULT__INIT;
		r.token = 1234567;
		r.count = 1;
		o.seq = 77;
		o.result = &r;
		o.pending = k & 1;
		o.queued = (k & 2) != 0;
		size_t n = raftlock__outcome__get_packed_size(&o);
		assert_true(n <= sizeof buf);
		raftlock__outcome__pack(&o, buf);
		bool p = !o.pending, q = !o.queued, dp, dq;
		assert_true(record_peek_outcome_marks(buf, n, &p, &q));
		assert_int_equal(p, o.pending);
		assert_int_equal(q, o.queued);
		for (size_t cut = 0; cut <= n; cut++) {
			if (!record_peek_outcome_marks(buf, cut, &p, &q))
				continue;
			assert_true(decoded_marks(buf, cut, &dp, &dq));
			assert_int_equal(p, dp);
			assert_int_equal(q, dq);
		}
	}
	bool p = false, q = false;
	static const uint8_t twice[] = {0x18, 0x01, 0x20, 0x01, 0x18, 0x00};
	assert_true(record_peek_outcome_marks(twice, sizeof twice, &p, &q));
	assert_false(p);
	assert_true(q);
	static const uint8_t wide[] = {0x18, 0x80, 0x01}; /* pending = 128 */
	assert_true(record_peek_outcome_marks(wide, sizeof wide, &p, &q));
	assert_true(p);
	assert_false(q);
	static const uint8_t fixed[] = {0x1d, 0x01, 0x00, 0x00, 0x00}; /* pending, wire type 5 */
	p = q = true;
	assert_false(record_peek_outcome_marks(fixed, sizeof fixed, &p, &q));
	assert_true(p && q); /* unchanged */
	static const uint8_t cut[] = {0x12, 0x05, 0x08};
	assert_false(record_peek_outcome_marks(cut, sizeof cut, &p, &q));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_held_lock_without_timer_passed_over),
		cmocka_unit_test(test_every_timer_seen),
		cmocka_unit_test(test_unreadable_bytes_left_to_the_decoder),
		cmocka_unit_test(test_queue_seen),
		cmocka_unit_test(test_parties_seen),
		cmocka_unit_test(test_name_seen),
		cmocka_unit_test(test_outcome_marks_as_decoded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
