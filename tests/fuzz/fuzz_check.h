/* fuzz_check.h: the fuzz targets' assertion: a failed check prints where
 * and aborts, so that libFuzzer saves the input. */
#ifndef RAFTLOCK_FUZZ_CHECK_H
#define RAFTLOCK_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                 \
		}                                                                                \
	} while (0)

#endif
