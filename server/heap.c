/* heap.c: see heap.h. */
#include "heap.h"

#ifdef RAFTLOCK_JEMALLOC
#include <jemalloc/jemalloc.h>

#define STR(x) #x
#define ARENAS_ALL(x) STR(x)

void heap_trim(void)
{
	mallctl("arena." ARENAS_ALL(MALLCTL_ARENAS_ALL) ".purge", NULL, NULL, NULL, 0);
}
#else
#include <malloc.h>

void heap_trim(void)
{
	malloc_trim(0);
}
#endif
