/*
 * grow.h: room in a growable array (bytes or records), shared by the
 * buffers of server and client. No I/O.
 */
#ifndef RAFTLOCK_GROW_H
#define RAFTLOCK_GROW_H

#include <stddef.h>

/*
 * Makes room for `need` elements of `size` bytes in the malloc'd array
 * whose pointer is at `array` (a T **, NULL to start) with room for *cap
 * elements: the capacity doubles from `first` until it fits. Returns 0, or
 * RAFTLOCK_ENOMEM leaving the array and *cap as they were.
 */
int grow(void *array, size_t *cap, size_t need, size_t first, size_t size);

#endif
