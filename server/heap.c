/* heap.c: see heap.h. */
#include "heap.h"

#ifdef RAFTLOCK_JEMALLOC
#include <jemalloc/jemalloc.h>

#define STR(x) #x
#define ARENAS_ALL(x) STR(x)

int heap_trim(void)
{
	return mallctl("arena." ARENAS_ALL(MALLCTL_ARENAS_ALL) ".purge", NULL, NULL, NULL, 0);
}
#else
#include <malloc.h>

int heap_trim(void)
{
	malloc_trim(0); /* its result says only whether it found pages to give */
	return 0;
}
#endif
