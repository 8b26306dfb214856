/*
 * metrics_label.h: a label value of the Prometheus text exposition, which
 * must be UTF-8 with backslash, double quote and newline escaped. Lock
 * names are bytes (raftlock.h), and their prefixes become labels
 * (raftlock_lock_prefix_waits): a byte that is not part of valid UTF-8 is
 * written as the text \xNN (its value in hex), and so that no lock name
 * can spell that text, a backslash as two. Two different values never
 * give one label value (which would make two series of one). No I/O.
 */
#ifndef RAFTLOCK_METRICS_LABEL_H
#define RAFTLOCK_METRICS_LABEL_H

#include <stddef.h>

/*
 * Writes v (a C string, borrowed for the call) as it goes between a
 * label's double quotes into out (cap bytes, NUL-terminated when cap > 0;
 * whole characters only). Returns the length the whole text needs, not
 * counting the NUL: it did not fit when that is cap or more.
 */
size_t metrics_label_write(char *out, size_t cap, const char *v);

#endif
