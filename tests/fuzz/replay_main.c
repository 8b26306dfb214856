/* replay_main.c: runs a fuzz target's inputs once each, without libFuzzer,
 * so that a compiler without it (gcc, the CI's) still replays the seeds
 * through the target's checks, under the build's sanitizers when it has
 * them. Arguments are files or directories of inputs (a directory's files
 * in name order); arguments starting with '-' (libFuzzer's options, as
 * `-runs=0`) are ignored, so that a test runs either build alike. A check
 * that fails aborts; no input at all is a failure too (a seed directory
 * left empty would otherwise pass). */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs the input in path; -1 when it cannot be read. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		perror(path);
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	while (buf != NULL) {
		if (len == cap) {
			uint8_t *bigger = realloc(buf, cap * 2);
			if (bigger == NULL)
				break;
			buf = bigger;
			cap *= 2;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	bool whole = buf != NULL && feof(f) && !ferror(f);
	fclose(f);
	if (whole)
		LLVMFuzzerTestOneInput(buf, len);
	else
		fprintf(stderr, "%s: cannot read\n", path);
	free(buf);
	return whole ? 0 : -1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Runs every regular file of dir; the number run, or -1. */
static long replay_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, by_name);
	if (n < 0) {
		perror(dir);
		return -1;
	}
	long run = 0;
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
		if (run >= 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
			run = replay_file(path) == 0 ? run + 1 : -1;
		free(names[i]);
	}
	free(names);
	return run;
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize != NULL)
		LLVMFuzzerInitialize(&argc, &argv);
	long run = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (argv[i][0] == '-')
			continue;
		long n = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)
				 ? replay_dir(argv[i])
				 : (replay_file(argv[i]) == 0 ? 1 : -1);
		if (n < 0)
			return 1;
		run += n;
	}
	printf("replayed %ld inputs\n", run);
	return run > 0 ? 0 : 1;
}
